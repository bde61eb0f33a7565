#ifndef PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_SEQ_H_
#define PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_SEQ_H_

// A synthetic click log of user histories with a known answer (issue 42):
// whether a user clicks a candidate item depends on the order of what they
// clicked before and on how those items relate to the candidate, so a model
// that reads the history as a bag (a mean of its embeddings, Wide & Deep's
// way) cannot reach the planted AUC, and one that attends over it in order
// (DIN, BST) can.
//
// The generative model, for seed S:
// - V items, ids 1..V; item i belongs to category cat(i) in [0, C), a pure
//   function of (S, i);
// - each example is a user with two categories of interest; its history is
//   n ~ uniform[1, max_history] items, oldest first, each from one of the
//   user's interests with probability `interest` (either, equally), else
//   from any category, the item uniform within its category;
// - the candidate comes from one of the user's interests with probability
//   `interest`, else from any category;
// - the planted logit is
//     bias + weight * sum_{k=1..n} decay^(k-1) [cat(h_k) == cat(c)]
//          + item_weight(c)
//   where h_1 is the most recent item: the candidate's category matching
//   the last items counts most, matches long ago hardly at all;
//   item_weight ~ N(0, item_stddev^2), a pure function of (S, c);
// - label ~ Bernoulli(sigmoid(logit)).
// Each example is a tf.train.Example with "label", "hist" (the items, oldest
// first), "hist_cat" (their categories), "cand" and "cand_cat" (int64 lists;
// categories are written as category + 1, so that no id is 0).

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace pstrain {

struct SyntheticSeqConfig {
  int64_t items = 2000;    // V >= 1
  int categories = 20;     // C in [2, 100000]
  int max_history = 30;    // >= 1
  double interest = 0.8;   // in [0, 1]
  double weight = 1.6;     // of a category match
  double decay = 0.5;      // per step back in the history, in [0, 1]
  double item_stddev = 0;  // of the candidate's own weight (0: none)
  double bias = -1.6;
  uint64_t seed = 1;
};

// One example as generated.
struct SeqExample {
  std::vector<int64_t> history;  // item ids, oldest first
  int64_t candidate = 0;
  int label = 0;
  double logit = 0;  // the planted model's
};

// The planted model's AUC and log loss on a set of examples.
struct SeqQuality {
  int64_t examples = 0;
  double auc = 0;
  double log_loss = 0;
  double base_rate = 0;
};

class SyntheticSeq {
 public:
  // InvalidArgument for a config out of the ranges above.
  static absl::StatusOr<SyntheticSeq> Create(const SyntheticSeqConfig& config);

  const SyntheticSeqConfig& config() const { return config_; }
  int Category(int64_t item) const;  // in [0, C)
  double ItemWeight(int64_t item) const;
  // The planted logit of a history (oldest first) and a candidate.
  double Logit(const std::vector<int64_t>& history, int64_t candidate) const;

  // The first `n` examples of stream `stream` (train 0, test 1): the same
  // (config, stream, n) gives the same examples.
  std::vector<SeqExample> Generate(int64_t n, uint64_t stream) const;

  // The examples as serialized tf.train.Examples.
  std::string Encode(const SeqExample& example) const;

  // Writes `examples` to `path` as a TFRecord file, an AtomicWritableFile:
  // `path` is whole or as it was.
  absl::Status WriteTfRecords(Env* env, const std::string& path,
                              const std::vector<SeqExample>& examples) const;

  // InvalidArgument for an empty set or one of a single class.
  static absl::StatusOr<SeqQuality> Evaluate(const std::vector<SeqExample>& examples);

 private:
  SyntheticSeq(SyntheticSeqConfig config, std::vector<std::vector<int64_t>> by_category)
      : config_(std::move(config)), by_category_(std::move(by_category)) {}

  SyntheticSeqConfig config_;
  std::vector<std::vector<int64_t>> by_category_;  // the items of each category
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_SEQ_H_
