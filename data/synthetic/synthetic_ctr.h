#ifndef PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_CTR_H_
#define PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_CTR_H_

// A synthetic click dataset with a known answer: Criteo-like examples whose
// labels are drawn from a planted logistic model, so the best AUC and log loss
// any model can reach on them are known (Evaluate) and a trainer's result can
// be judged against them.
//
// The generative model, for seed S:
// - categorical field f (of F <= 26) takes id r in [1, V_f] with Zipf
//   probability r^-s_f / H(V_f, s_f) (H the generalized harmonic number); the
//   id is written as its 8-digit hex (id 0 is kCriteoMissingId, never drawn);
// - dense feature d (of D <= 13) has a latent z_d ~ N(0, 1), stored as the
//   Criteo-like count v_d = max(0, round(exp(z_d + 3) - 1)), so that the usual
//   Criteo transform recovers it: x_d = CriteoLog1p(v_d) - 3 ~= z_d
//   (kSyntheticDenseOffset);
// - the planted logit is bias + sum_f w_f[id_f] + sum_d u_d x_d, with
//   w_f[r] ~ N(0, id_weight_stddev^2) and u_d ~ N(0, dense_weight_stddev^2),
//   each a pure function of (S, f, r) or (S, d);
// - label ~ Bernoulli(sigmoid(logit)).
// Fields F+1..26 and dense D+1..13 are written empty (missing).
//
// Everything is computed from the examples as stored (the quantized v_d), so
// the planted model is exactly representable by a logistic model (or a Wide &
// Deep one) that reads the TSV: one weight per (field, id), the log1p of each
// dense value, a bias. Examples come in numbered streams (train = 0, test =
// 1, or one per worker): the same (config, stream) gives the same examples,
// byte for byte, on the same platform (random numbers are drawn from
// std::mt19937_64 and turned into uniforms and normals by code here, not by
// the implementation-defined std:: distributions; only libm's exp/log/cos may
// differ in the last bit between platforms).

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "data/formats/criteo.h"

namespace pstrain {

inline constexpr double kSyntheticDenseOffset = 3.0;
inline constexpr uint64_t kSyntheticTrainStream = 0;
inline constexpr uint64_t kSyntheticTestStream = 1;

struct SyntheticCtrConfig {
  int num_categorical = kCriteoNumCategorical;  // F, in [0, 26]
  int num_dense = kCriteoNumDense;              // D, in [0, 13]
  // Per categorical field; a list of one value applies to every field.
  std::vector<int64_t> vocabulary = {10000};  // V_f >= 1, at most 2^32 - 1
  std::vector<double> zipf_exponent = {1.1};  // s_f >= 0 (0: uniform)
  double id_weight_stddev = 0.25;
  double dense_weight_stddev = 0.25;
  double bias = -1.3;  // with the defaults: a click rate near Criteo's ~26%
  uint64_t seed = 1;
};

// How well the planted model itself predicts a set of examples: the best a
// trained model can do, up to sampling noise.
struct PlantedModelQuality {
  int64_t examples = 0;
  double auc = 0;
  double log_loss = 0;
  double base_rate = 0;           // mean label
  double base_rate_log_loss = 0;  // log loss of always predicting base_rate
};

class SyntheticCtr {
 public:
  // InvalidArgument for a config out of the ranges above or lists of
  // vocabulary / exponents whose length is neither 1 nor F. Holds one double
  // per id of every field (the Zipf CDFs): 8 bytes x sum of V_f.
  static absl::StatusOr<SyntheticCtr> Create(const SyntheticCtrConfig& config);

  const SyntheticCtrConfig& config() const { return config_; }

  // The Zipf probability of id `id` (1-based rank) in field `field`.
  double IdProbability(int field, int64_t id) const;

  // The planted weight of `id` in `field`; 0 for kCriteoMissingId and for ids
  // outside [1, V_f] (they are never generated).
  double IdWeight(int field, uint32_t id) const;

  // A drifting stream (online training): the planted model of its shard
  // `shard`, in which, at every shard from 1 to `shard`, each id of each
  // field drew a new weight with probability `drift` (a pure function of
  // the seed, the field, the id and the shard). Shard 0 or drift 0: the
  // weights above. The dense weights do not drift.
  void SetDrift(double drift, int64_t shard);
  // A day of a time-partitioned log whose model moves from day to day and
  // back (the weather of a flight log, a sale in a click log): on day
  // `day`, each id of each field has, with probability `shift`, a weight of
  // that day's own (a pure function of the seed, the field, the id and the
  // day) in place of its weight above. The model of all days together is the
  // base one, shrunk; shift 0: the weights above.
  void SetDay(double shift, int64_t day);
  // The planted weight of dense feature `d`.
  double DenseWeight(int d) const;

  // The planted logit and click probability of row `row` of `batch` (as
  // generated, or as read back from the TSV).
  double Logit(const CriteoBatch& batch, int64_t row) const;
  double Probability(const CriteoBatch& batch, int64_t row) const;

  // A stream of examples; Next continues where the last call stopped, so n
  // examples in one call or in several are the same examples. The stream
  // refers to its SyntheticCtr, which must outlive it. Not thread-safe; make
  // one stream per thread.
  class Stream {
   public:
    // Replaces `*batch` with the next `n` examples.
    void Next(int64_t n, CriteoBatch* batch);

   private:
    friend class SyntheticCtr;
    Stream(const SyntheticCtr* generator, uint64_t seed);
    double Uniform();  // in [0, 1), 53 random bits
    double Normal();

    const SyntheticCtr* generator_;
    std::mt19937_64 engine_;  // its output sequence is fixed by the standard
  };
  Stream NewStream(uint64_t stream) const;

  // The first `n` examples of stream `stream`.
  CriteoBatch Generate(int64_t n, uint64_t stream) const;

  // Writes the first `n` examples of `stream` to `path` as Criteo TSV, in
  // chunks (memory is bounded, not proportional to n), as an
  // AtomicWritableFile: `path` is whole or as it was.
  absl::Status WriteTsv(Env* env, const std::string& path, int64_t n, uint64_t stream) const;

  // The planted model's AUC and log loss on `batch`. InvalidArgument if it is
  // empty or holds a single class.
  absl::StatusOr<PlantedModelQuality> Evaluate(const CriteoBatch& batch) const;

 private:
  SyntheticCtr(SyntheticCtrConfig config, std::vector<std::vector<double>> cdfs)
      : config_(std::move(config)), cdfs_(std::move(cdfs)) {}

  SyntheticCtrConfig config_;
  std::vector<std::vector<double>> cdfs_;  // per field: cdfs_[f][r - 1] = P(id <= r)
  double drift_ = 0;
  int64_t drift_shard_ = 0;
  double day_shift_ = 0;
  int64_t day_ = 0;
};

}  // namespace pstrain

#endif  // PSTRAIN_DATA_SYNTHETIC_SYNTHETIC_CTR_H_
