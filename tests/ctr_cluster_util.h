#ifndef PSTRAIN_TESTS_CTR_CLUSTER_UTIL_H_
#define PSTRAIN_TESTS_CTR_CLUSTER_UTIL_H_

// What the tests of click models on real processes share: synthetic click
// data with a planted logistic model (data/synthetic/synthetic_ctr.h), a Wide & Deep
// spec over it, and the fixture that writes both.

#include <cstdint>
#include <string>

#include "data/formats/criteo.h"
#include "data/synthetic/synthetic_ctr.h"
#include "nlohmann/json.hpp"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace testing_util {

inline constexpr int kCtrFields = 8;

// 8 categorical fields of 100 ids, 4 dense features, seed 3.
SyntheticCtrConfig DataConfig();

// Wide & Deep: a linear part over every field and the cross C1 x C2, and
// embeddings concatenated with the dense features into a small MLP; dynamic
// tables.
std::string WideAndDeepSpec();

// Example `i` of `batch` as a JSON instance for pstrain-predict and
// pstrain-serve: "dense" as training transforms it (log1p), each of the
// kCtrFields categorical fields present as "C<f>": its hex string.
nlohmann::json CtrInstance(const CriteoBatch& batch, int64_t i);

// "accuracy, auc, loss" of the last evaluation line, and its step.
struct Eval {
  int64_t step = -1;
  double auc = 0, loss = 0;
};
Eval LastEval(const std::string& output);

// SetUp writes `ctr_` (train.tsv: 100000 examples of the training stream,
// test.tsv: 10000 of the test stream), the planted model's quality on the
// test examples, and the Wide & Deep spec (`spec_`).
class CtrClusterTest : public ClusterTestBase {
 protected:
  CtrClusterTest(std::string name, std::string bin_dir)
      : ClusterTestBase(std::move(name)), bin_(std::move(bin_dir)) {}

  void SetUp() override;

  // Trains the job of `config` to `steps`; the launcher's output.
  ProcessResult Train(const std::string& config, int steps);

  const std::string bin_;
  std::string ctr_, spec_;
  PlantedModelQuality planted_;
};

}  // namespace testing_util
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_CTR_CLUSTER_UTIL_H_
