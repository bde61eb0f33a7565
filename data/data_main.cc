// pstrain-data: converts MNIST idx and CIFAR-10 binary data to TFRecord files
// of tf.train.Example (the layouts of TensorFlow's create_records.py and
// generate_cifar10_tfrecords.py), and describes any such file.
//   pstrain-data convert <input dir> <output dir>
//   pstrain-data describe <file.tfrecords> ...
//   pstrain-data instances <data dir> <count>
//   pstrain-data synthetic-ctr --out FILE --examples N [--seed S] [--test_out FILE]
//       [--test_examples M]
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
#include "data/synthetic_ctr.h"
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
               "         their labels on stderr\n"
               "       pstrain-data synthetic-ctr --out FILE --examples N [--seed S]\n"
               "           [--test_out FILE] [--test_examples M]\n"
               "         a synthetic click dataset in Criteo TSV (default config of\n"
               "         data/synthetic_ctr.h): N training examples to FILE, M (default\n"
               "         100000) test examples to --test_out if given, and the planted\n"
               "         model's AUC and log loss on the test examples, the best attainable\n");
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

// Writes the training (and test) split and prints the planted model's quality.
int WriteSyntheticCtr(pstrain::Env* env, int argc, char** argv) {
  std::string out, test_out;
  int64_t examples = -1, test_examples = 100000;
  pstrain::SyntheticCtrConfig config;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return Usage();
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--out") {
      out = value;
    } else if (flag == "--test_out") {
      test_out = value;
    } else if (flag == "--examples") {
      ok = absl::SimpleAtoi(value, &examples) && examples >= 0;
    } else if (flag == "--test_examples") {
      ok = absl::SimpleAtoi(value, &test_examples) && test_examples >= 2;
    } else if (flag == "--seed") {
      ok = absl::SimpleAtoi(value, &config.seed);
    } else {
      ok = false;
    }
    if (!ok) return Usage();
  }
  if (out.empty() || examples < 0) return Usage();
  absl::StatusOr<pstrain::SyntheticCtr> generator = pstrain::SyntheticCtr::Create(config);
  absl::Status status = generator.status();
  if (status.ok()) {
    status = generator->WriteTsv(env, out, examples, pstrain::kSyntheticTrainStream);
  }
  if (status.ok() && !test_out.empty()) {
    status = generator->WriteTsv(env, test_out, test_examples, pstrain::kSyntheticTestStream);
  }
  absl::StatusOr<pstrain::PlantedModelQuality> quality =
      status.ok()
          ? generator->Evaluate(generator->Generate(test_examples, pstrain::kSyntheticTestStream))
          : status;
  if (!quality.ok()) {
    std::fprintf(stderr, "pstrain-data: %s\n", std::string(quality.status().message()).c_str());
    return 1;
  }
  std::printf(
      "wrote %lld examples to %s (seed %llu)\n"
      "planted model on %lld test examples: AUC %.4f, log loss %.4f; base rate %.4f, its log "
      "loss %.4f\n",
      static_cast<long long>(examples), out.c_str(), static_cast<unsigned long long>(config.seed),
      static_cast<long long>(quality->examples), quality->auc, quality->log_loss,
      quality->base_rate, quality->base_rate_log_loss);
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
  if (argc >= 2 && std::strcmp(argv[1], "synthetic-ctr") == 0)
    return WriteSyntheticCtr(env, argc, argv);
  return Usage();
}
