// pstrain-data: converts MNIST idx and CIFAR-10 binary data to TFRecord files
// of tf.train.Example (the layouts of TensorFlow's create_records.py and
// generate_cifar10_tfrecords.py), and describes any such file.
//   pstrain-data convert <input dir> <output dir>
//   pstrain-data convert PATTERN --out PREFIX [--shards N] [--csv_schema FILE]
//   pstrain-data describe <file.tfrecords> ...
//   pstrain-data instances <data dir> <count>
//   pstrain-data read PATTERN [--batch_size N] [--shuffle_buffer N] [--num_dense N] [--sparse a,b]
//   pstrain-data synthetic-ctr --out FILE --examples N [--seed S] [--test_out FILE]
//       [--test_examples M]
//   pstrain-data synthetic-ctr --stream DIR --examples N --every SECS [--drift D] [--count K]
//   pstrain-data synthetic-seq --out DIR --examples N [--test_examples M] [--seed S] ...
// Each subcommand is a file of its own (<name>_command.cc, commands.h), its
// flags read by flag_parser.h; this file only dispatches.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cloud/gcs_env.h"
#include "common/version.h"
#include "data/tool/commands.h"

int main(int argc, char** argv) {
  if (pstrain::PrintVersionIfAsked(argc, argv, "pstrain-data")) return 0;
  pstrain::Env* env = pstrain::ProcessEnv();
  if (argc < 2) return pstrain::data_tool::Usage();
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  using Run = int (*)(pstrain::Env*, std::span<const std::string>);
  const std::pair<const char*, Run> commands[] = {
      {"convert", pstrain::data_tool::RunConvert},
      {"describe", pstrain::data_tool::RunDescribe},
      {"instances", pstrain::data_tool::RunInstances},
      {"read", pstrain::data_tool::RunRead},
      {"synthetic-ctr", pstrain::data_tool::RunSyntheticCtr},
      {"synthetic-seq", pstrain::data_tool::RunSyntheticSeq},
      {"synthetic-multitask", pstrain::data_tool::RunSyntheticMultitask},
  };
  for (const auto& [name, run] : commands) {
    if (command == name) return run(env, args);
  }
  return pstrain::data_tool::Usage();
}
