#ifndef PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_MULTITASK_H_
#define PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_MULTITASK_H_

// A synthetic multi-task log with known answers (issue 53): a shop's
// impressions, each with a click, a conversion (a purchase after the click)
// and a dwell time, drawn from planted models that share their features, so
// a model of several heads can be judged against the best attainable.
//
// The generative model, for seed S:
// - user u uniform in [1, users], item i uniform in [1, items], price
//   lognormal (z = log(price) - 3 ~ N(0, 1)), hour uniform in [0, 24);
// - per user and item, weights a_u, b_i, c_u, d_i ~ N(0, 0.8^2), pure
//   functions of (S, id); the conversion's item weight shares the click's:
//   d'_i = 0.6 b_i + 0.8 d_i;
// - click ~ Bernoulli(sigmoid(-1 + a_u + b_i - 0.3 z + 0.6 [hour >= 18]));
// - convert = click * Bernoulli(sigmoid(-0.5 + c_u + d'_i - 0.8 z)): a
//   conversion needs a click (ESMM's CTCVR);
// - dwell = 30 + 10 (a_u + b_i) + 5 e, e ~ N(0, 1): seconds on the page, a
//   regression head's label (the planted RMSE is 5).
// Rows are CSV: user,item,price,hour,click,convert,dwell. Stream 0 is the
// training data, stream 1 the test data.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

struct SyntheticMultitaskConfig {
  int64_t users = 2000;
  int64_t items = 1000;
  uint64_t seed = 1;
};

// The planted models on a set of rows: the best a trained model can do, up
// to sampling noise.
struct MultitaskQuality {
  int64_t examples = 0;
  double click_auc = 0;    // of P(click)
  double convert_auc = 0;  // of P(click) P(convert | click)
  double dwell_rmse = 0;   // of the dwell's planted mean
  double click_rate = 0;
  double convert_rate = 0;
};

// Writes `examples` rows of stream `stream` (with the header) to `path`,
// atomically, and returns the planted models' quality on them.
// InvalidArgument for users, items or examples < 1.
absl::StatusOr<MultitaskQuality> WriteSyntheticMultitaskCsv(Env* env, const std::string& path,
                                                            const SyntheticMultitaskConfig& config,
                                                            int64_t examples, uint64_t stream);

}  // namespace pstrain

#endif  // PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_MULTITASK_H_
