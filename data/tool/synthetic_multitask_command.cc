// pstrain-data synthetic-multitask: train.csv and test.csv of a shop's
// impressions with three labels (data/synthetic/synthetic_multitask.h), and
// the planted models' quality.
#include <cstdio>
#include <string>

#include "data/synthetic/synthetic_multitask.h"
#include "data/tool/commands.h"
#include "data/tool/flag_parser.h"

namespace pstrain::data_tool {

int RunSyntheticMultitask(Env* env, std::span<const std::string> args) {
  std::string out;
  int64_t examples = -1, test_examples = 50000;
  SyntheticMultitaskConfig config;
  FlagParser flags;
  flags.String("--out", &out);
  flags.Int("--examples", &examples, 1);
  flags.Int("--test_examples", &test_examples, 2);
  flags.Int("--seed", &config.seed);
  flags.Int("--users", &config.users, 1);
  flags.Int("--items", &config.items, 1);
  if (!flags.Parse(args) || out.empty() || examples < 1) return Usage();
  if (absl::Status s = env->CreateDirs(out); !s.ok()) return Fail(s);
  absl::StatusOr<MultitaskQuality> train =
      WriteSyntheticMultitaskCsv(env, out + "/train.csv", config, examples, 0);
  if (!train.ok()) return Fail(train.status());
  absl::StatusOr<MultitaskQuality> test =
      WriteSyntheticMultitaskCsv(env, out + "/test.csv", config, test_examples, 1);
  if (!test.ok()) return Fail(test.status());
  std::printf(
      "wrote %lld training and %lld test rows to %s/{train,test}.csv\n"
      "planted models on the test rows: click auc = %.4f, convert auc = %.4f, dwell rmse = "
      "%.4f; click rate = %.4f, convert rate = %.4f\n",
      static_cast<long long>(examples), static_cast<long long>(test_examples), out.c_str(),
      test->click_auc, test->convert_auc, test->dwell_rmse, test->click_rate, test->convert_rate);
  return 0;
}

}  // namespace pstrain::data_tool
