// pstrain-data synthetic-seq: train.tfrecords and test.tfrecords of user
// histories (data/synthetic/synthetic_seq.h) in DIR, and the planted model's AUC.
#include <cstdio>
#include <string>
#include <vector>

#include "data/synthetic/synthetic_ctr.h"
#include "data/synthetic/synthetic_seq.h"
#include "data/tool/commands.h"
#include "data/tool/flag_parser.h"

namespace pstrain::data_tool {

int RunSyntheticSeq(Env* env, std::span<const std::string> args) {
  std::string out;
  int64_t examples = -1, test_examples = 100000;
  SyntheticSeqConfig config;
  FlagParser flags;
  flags.String("--out", &out);
  flags.Int("--examples", &examples, 1);
  flags.Int("--test_examples", &test_examples, 2);
  flags.Int("--seed", &config.seed);
  flags.Int("--items", &config.items);
  flags.Int("--categories", &config.categories);
  flags.Int("--max_history", &config.max_history);
  flags.Double("--item_stddev", &config.item_stddev);
  if (!flags.Parse(args) || out.empty() || examples < 1) return Usage();
  absl::StatusOr<SyntheticSeq> generator = SyntheticSeq::Create(config);
  if (!generator.ok()) return Fail(generator.status());
  if (absl::Status s = env->CreateDirs(out); !s.ok()) return Fail(s);
  const std::vector<SeqExample> train = generator->Generate(examples, kSyntheticTrainStream);
  if (absl::Status s = generator->WriteTfRecords(env, out + "/train.tfrecords", train); !s.ok()) {
    return Fail(s);
  }
  const std::vector<SeqExample> test = generator->Generate(test_examples, kSyntheticTestStream);
  if (absl::Status s = generator->WriteTfRecords(env, out + "/test.tfrecords", test); !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<SeqQuality> q = SyntheticSeq::Evaluate(test);
  if (!q.ok()) return Fail(q.status());
  std::printf(
      "wrote %lld training and %lld test examples to %s/{train,test}.tfrecords\n"
      "planted model on the test examples: auc = %.4f, log loss = %.4f, click rate = %.4f\n",
      static_cast<long long>(examples), static_cast<long long>(test_examples), out.c_str(), q->auc,
      q->log_loss, q->base_rate);
  return 0;
}

}  // namespace pstrain::data_tool
