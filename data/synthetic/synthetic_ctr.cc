#include "data/synthetic/synthetic_ctr.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "data/binary_metrics.h"

namespace pstrain {
namespace {

// SplitMix64's finalizer: a bijective 64-bit mix, used to derive independent
// seeds and the planted weights from (seed, what, index).
uint64_t Mix(uint64_t x) { return MixBits64(x + kSplitMix64Gamma); }

uint64_t Mix3(uint64_t a, uint64_t b, uint64_t c) { return Mix(Mix(Mix(a) ^ b) ^ c); }

// What a derived value is for, so streams and weights never share bits.
enum Purpose : uint64_t { kStreamSeed = 1, kIdWeight = 2, kDenseWeight = 3, kDrift = 4, kDay = 5 };

double ToUniform(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// A standard normal from two uniform bit patterns (Box-Muller).
double ToNormal(uint64_t a, uint64_t b) {
  const double u1 = 1.0 - ToUniform(a);  // (0, 1]: log is finite
  const double u2 = ToUniform(b);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// A normal that is a pure function of (seed, purpose, index).
double HashedNormal(uint64_t seed, Purpose purpose, uint64_t index) {
  const uint64_t h = Mix3(seed, purpose, index);
  return ToNormal(Mix(h ^ 1), Mix(h ^ 2));
}

double Sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

template <typename T>
T PerField(const std::vector<T>& values, int field) {
  return values.size() == 1 ? values[0] : values[field];
}

}  // namespace

absl::StatusOr<SyntheticCtr> SyntheticCtr::Create(const SyntheticCtrConfig& config) {
  const int f = config.num_categorical;
  if (f < 0 || f > kCriteoNumCategorical) {
    return absl::InvalidArgumentError(absl::StrCat("num_categorical ", f, " is not in [0, ",
                                                   kCriteoNumCategorical, "] (Criteo's C1..C26)"));
  }
  if (config.num_dense < 0 || config.num_dense > kCriteoNumDense) {
    return absl::InvalidArgumentError(absl::StrCat("num_dense ", config.num_dense,
                                                   " is not in [0, ", kCriteoNumDense,
                                                   "] (Criteo's I1..I13)"));
  }
  auto size_ok = [f](size_t n) { return n == 1 || n == static_cast<size_t>(f); };
  if (!size_ok(config.vocabulary.size()) || !size_ok(config.zipf_exponent.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary has ", config.vocabulary.size(), " entries and zipf_exponent ",
                     config.zipf_exponent.size(), "; each needs 1 (for every field) or ", f,
                     " (one per field)"));
  }
  if (!(config.id_weight_stddev >= 0) || !(config.dense_weight_stddev >= 0) ||
      !std::isfinite(config.id_weight_stddev) || !std::isfinite(config.dense_weight_stddev) ||
      !std::isfinite(config.bias)) {
    return absl::InvalidArgumentError(
        "id_weight_stddev and dense_weight_stddev must be finite and >= 0, bias finite");
  }
  std::vector<std::vector<double>> cdfs(f);
  for (int i = 0; i < f; ++i) {
    const int64_t v = PerField(config.vocabulary, i);
    const double s = PerField(config.zipf_exponent, i);
    if (v < 1 || v > 0xffffffffLL) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocabulary ", v, " of field C", i + 1, " is not in [1, 2^32 - 1]"));
    }
    if (!(s >= 0) || !std::isfinite(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zipf_exponent ", s, " of field C", i + 1, " must be finite and >= 0"));
    }
    std::vector<double>& cdf = cdfs[i];
    cdf.resize(v);
    double sum = 0;
    for (int64_t r = 1; r <= v; ++r) cdf[r - 1] = sum += std::pow(static_cast<double>(r), -s);
    for (double& c : cdf) c /= sum;
    cdf.back() = 1.0;  // exactly, so every uniform in [0, 1) finds an id
  }
  return SyntheticCtr(config, std::move(cdfs));
}

double SyntheticCtr::IdProbability(int field, int64_t id) const {
  const std::vector<double>& cdf = cdfs_[field];
  if (id < 1 || id > static_cast<int64_t>(cdf.size())) return 0;
  return id == 1 ? cdf[0] : cdf[id - 1] - cdf[id - 2];
}

double SyntheticCtr::IdWeight(int field, uint32_t id) const {
  if (field < 0 || field >= config_.num_categorical || id == kCriteoMissingId ||
      id > cdfs_[field].size()) {
    return 0;
  }
  const uint64_t index = (static_cast<uint64_t>(field) << 32) | id;
  // A day's own weight, for that day only.
  if (day_shift_ > 0 &&
      ToUniform(Mix3(config_.seed, kDay, Mix(index) ^ static_cast<uint64_t>(day_))) < day_shift_) {
    return config_.id_weight_stddev *
           HashedNormal(Mix3(config_.seed, kDay, static_cast<uint64_t>(day_)), kIdWeight, index);
  }
  // The last shard (up to drift_shard_) at which the id drew a new weight.
  uint64_t version = 0;
  for (int64_t shard = drift_shard_; shard >= 1 && drift_ > 0; --shard) {
    if (ToUniform(Mix3(config_.seed, kDrift, Mix(index) ^ static_cast<uint64_t>(shard))) < drift_) {
      version = static_cast<uint64_t>(shard);
      break;
    }
  }
  const uint64_t seed = version == 0 ? config_.seed : Mix3(config_.seed, kDrift, version);
  return config_.id_weight_stddev * HashedNormal(seed, kIdWeight, index);
}

void SyntheticCtr::SetDrift(double drift, int64_t shard) {
  drift_ = std::clamp(drift, 0.0, 1.0);
  drift_shard_ = std::max<int64_t>(0, shard);
}

void SyntheticCtr::SetDay(double shift, int64_t day) {
  day_shift_ = std::clamp(shift, 0.0, 1.0);
  day_ = std::max<int64_t>(0, day);
}

double SyntheticCtr::DenseWeight(int d) const {
  return config_.dense_weight_stddev * HashedNormal(config_.seed, kDenseWeight, d);
}

double SyntheticCtr::Logit(const CriteoBatch& batch, int64_t row) const {
  double logit = config_.bias;
  for (int f = 0; f < config_.num_categorical; ++f) {
    logit += IdWeight(f, batch.categorical[row * kCriteoNumCategorical + f]);
  }
  for (int d = 0; d < config_.num_dense; ++d) {
    const int64_t k = row * kCriteoNumDense + d;
    const double x = static_cast<double>(CriteoLog1p(batch.dense[k], batch.dense_present[k] != 0)) -
                     kSyntheticDenseOffset;
    logit += DenseWeight(d) * x;
  }
  return logit;
}

double SyntheticCtr::Probability(const CriteoBatch& batch, int64_t row) const {
  return Sigmoid(Logit(batch, row));
}

SyntheticCtr::Stream::Stream(const SyntheticCtr* generator, uint64_t seed)
    : generator_(generator), engine_(seed) {}

double SyntheticCtr::Stream::Uniform() { return ToUniform(engine_()); }

double SyntheticCtr::Stream::Normal() {
  const uint64_t a = engine_();
  return ToNormal(a, engine_());
}

void SyntheticCtr::Stream::Next(int64_t n, CriteoBatch* batch) {
  const SyntheticCtrConfig& config = generator_->config_;
  batch->Clear();
  batch->labels.resize(n);
  batch->dense.assign(n * kCriteoNumDense, 0);
  batch->dense_present.assign(n * kCriteoNumDense, 0);
  batch->categorical.assign(n * kCriteoNumCategorical, kCriteoMissingId);
  for (int64_t row = 0; row < n; ++row) {
    for (int f = 0; f < config.num_categorical; ++f) {
      const std::vector<double>& cdf = generator_->cdfs_[f];
      const double u = Uniform();
      const int64_t rank = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin() + 1;
      batch->categorical[row * kCriteoNumCategorical + f] =
          static_cast<uint32_t>(std::min<int64_t>(rank, cdf.size()));
    }
    for (int d = 0; d < config.num_dense; ++d) {
      const double z = Normal();
      const double count = std::round(std::expm1(z + kSyntheticDenseOffset));
      batch->dense[row * kCriteoNumDense + d] = static_cast<int64_t>(std::max(count, 0.0));
      batch->dense_present[row * kCriteoNumDense + d] = 1;
    }
    batch->labels[row] = Uniform() < generator_->Probability(*batch, row) ? 1.0f : 0.0f;
  }
}

SyntheticCtr::Stream SyntheticCtr::NewStream(uint64_t stream) const {
  return Stream(this, Mix3(config_.seed, kStreamSeed, stream));
}

CriteoBatch SyntheticCtr::Generate(int64_t n, uint64_t stream) const {
  CriteoBatch batch;
  NewStream(stream).Next(n, &batch);
  return batch;
}

absl::Status SyntheticCtr::WriteTsv(Env* env, const std::string& path, int64_t n,
                                    uint64_t stream) const {
  absl::StatusOr<std::unique_ptr<AtomicWritableFile>> file = env->NewAtomicWritableFile(path);
  if (!file.ok()) return file.status();
  Stream examples = NewStream(stream);
  CriteoBatch batch;
  std::string text;
  constexpr int64_t kChunk = 1 << 14;
  for (int64_t done = 0; done < n; done += kChunk) {
    examples.Next(std::min(kChunk, n - done), &batch);
    text.clear();
    for (int64_t row = 0; row < batch.size(); ++row) AppendCriteoLine(batch, row, &text);
    if (absl::Status s = (*file)->Append(text); !s.ok()) return s;
  }
  return (*file)->Commit();
}

absl::StatusOr<PlantedModelQuality> SyntheticCtr::Evaluate(const CriteoBatch& batch) const {
  std::vector<double> logits(batch.size());
  std::vector<double> probabilities(batch.size());
  for (int64_t row = 0; row < batch.size(); ++row) {
    logits[row] = Logit(batch, row);
    probabilities[row] = Sigmoid(logits[row]);
  }
  PlantedModelQuality q;
  q.examples = batch.size();
  // AUC from the logits: the same order as the probabilities, without the
  // ties that rounding sigmoid near 0 or 1 would add.
  absl::StatusOr<double> auc = BinaryAuc(logits, batch.labels);
  if (!auc.ok()) return auc.status();
  q.auc = *auc;
  absl::StatusOr<double> log_loss = MeanLogLoss(probabilities, batch.labels);
  if (!log_loss.ok()) return log_loss.status();
  q.log_loss = *log_loss;
  absl::StatusOr<double> base = BaseRateLogLoss(batch.labels);
  if (!base.ok()) return base.status();
  q.base_rate_log_loss = *base;
  double positives = 0;
  for (float y : batch.labels) positives += y;
  q.base_rate = positives / static_cast<double>(batch.size());
  return q;
}

}  // namespace pstrain
