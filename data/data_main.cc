// pstrain-data: converts MNIST idx and CIFAR-10 binary data to TFRecord files
// of tf.train.Example (the layouts of TensorFlow's create_records.py and
// generate_cifar10_tfrecords.py), and describes any such file.
//   pstrain-data convert <input dir> <output dir>
//   pstrain-data describe <file.tfrecords> ...
//   pstrain-data instances <data dir> <count>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cloud/gcs_env.h"
#include "common/env.h"
#include "common/version.h"
#include "data/convert.h"
#include "data/load.h"
#include "data/tfrecord_dataset.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: pstrain-data convert <input dir> <output dir>\n"
               "         MNIST idx files -> train.tfrecords, test.tfrecords\n"
               "         CIFAR-10 binary batches -> train.tfrecords (batches 1-4),\n"
               "         validation.tfrecords (batch 5), eval.tfrecords (test batch)\n"
               "       pstrain-data describe <file.tfrecords> ...\n"
               "         record count, feature names, types and sizes; verifies checksums\n"
               "       pstrain-data instances <data dir> <count>\n"
               "         the first <count> test examples as prediction instances, one JSON\n"
               "         list of pixel / 255 per line (pstrain-predict --json_instances);\n"
               "         their labels on stderr\n");
  return 2;
}

// The first `count` test examples as JSON instance lines.
int Instances(pstrain::Env* env, const std::string& dir, const std::string& count_text) {
  int64_t count = 0;
  if (!absl::SimpleAtoi(count_text, &count) || count < 1) return Usage();
  absl::StatusOr<pstrain::Dataset> test = pstrain::LoadDataset(env, dir, pstrain::Split::kTest);
  if (!test.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(test.status().message()).c_str());
    return 1;
  }
  count = std::min(count, test->size());
  std::string labels;
  for (int64_t i = 0; i < count; ++i) {
    std::string line = "[";
    for (int64_t k = 0; k < test->example_size(); ++k) {
      const int pixel = test->images[i * test->example_size() + k];
      absl::StrAppend(&line, k ? "," : "", absl::StrFormat("%.4g", pixel / 255.0));
    }
    std::printf("%s]\n", line.c_str());
    absl::StrAppend(&labels, i ? " " : "", test->labels[i]);
  }
  std::fprintf(stderr, "labels: %s\n", labels.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-data")) return 0;
  pstrain::Env* env = pstrain::ProcessEnv();
  if (argc == 4 && std::strcmp(argv[1], "convert") == 0) {
    absl::StatusOr<std::vector<pstrain::ConvertedFile>> files = pstrain::ConvertToTfRecords(
        env, argv[2], argv[3],
        [](const std::string& line) { std::printf("%s\n", line.c_str()), std::fflush(stdout); });
    if (!files.ok()) {
      std::fprintf(stderr, "pstrain-data: %s\n", std::string(files.status().message()).c_str());
      return 1;
    }
    return 0;
  }
  if (argc >= 3 && std::strcmp(argv[1], "describe") == 0) {
    int rc = 0;
    for (int i = 2; i < argc; ++i) {
      absl::StatusOr<std::string> text = pstrain::DescribeExampleFile(env, argv[i]);
      if (!text.ok()) {
        std::fprintf(stderr, "pstrain-data: %s\n", std::string(text.status().message()).c_str());
        rc = 1;
        continue;
      }
      std::fputs(text->c_str(), stdout);
    }
    return rc;
  }
  if (argc == 4 && std::strcmp(argv[1], "instances") == 0) return Instances(env, argv[2], argv[3]);
  return Usage();
}
