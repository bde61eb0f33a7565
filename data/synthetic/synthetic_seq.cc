#include "data/synthetic/synthetic_seq.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/record_writer.h"
#include "data/binary_metrics.h"
#include "proto/example.pb.h"

namespace pstrain {
namespace {

// Uniform in [0, 1) from 53 random bits.
double Uniform01(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// A pure function of (seed, what, index): the categories and item weights.
uint64_t Hashed(uint64_t seed, uint64_t what, uint64_t index) {
  return MixBits64(MixBits64(seed * 0x9E3779B97F4A7C15ull + what) ^ index);
}

void AddInts(tf::Features* features, const std::string& name, const std::vector<int64_t>& values) {
  tf::Int64List* list = (*features->mutable_feature())[name].mutable_int64_list();
  for (int64_t v : values) list->add_value(v);
}

}  // namespace

absl::StatusOr<SyntheticSeq> SyntheticSeq::Create(const SyntheticSeqConfig& config) {
  const auto in = [](double v, double lo, double hi) { return v >= lo && v <= hi; };
  if (config.items < 1 || config.items > 10000000 || config.categories < 2 ||
      config.categories > 100000 || config.max_history < 1 || config.max_history > 100000 ||
      !in(config.interest, 0, 1) || !in(config.decay, 0, 1) || !std::isfinite(config.weight) ||
      !(config.item_stddev >= 0 && std::isfinite(config.item_stddev)) ||
      !std::isfinite(config.bias)) {
    return absl::InvalidArgumentError(
        "synthetic-seq: items in [1, 10000000], categories in [2, 100000], max_history in [1, "
        "100000], interest and decay in [0, 1], finite weights");
  }
  std::vector<std::vector<int64_t>> by_category(config.categories);
  SyntheticSeq seq(config, {});
  for (int64_t i = 1; i <= config.items; ++i) by_category[seq.Category(i)].push_back(i);
  // A category no item fell into gets one, so that every category can be drawn.
  for (int c = 0; c < config.categories; ++c) {
    if (by_category[c].empty()) by_category[c].push_back(1 + c % config.items);
  }
  seq.by_category_ = std::move(by_category);
  return seq;
}

int SyntheticSeq::Category(int64_t item) const {
  return static_cast<int>(Hashed(config_.seed, 1, static_cast<uint64_t>(item)) %
                          static_cast<uint64_t>(config_.categories));
}

double SyntheticSeq::ItemWeight(int64_t item) const {
  const uint64_t h = Hashed(config_.seed, 2, static_cast<uint64_t>(item));
  const double u1 = 1.0 - Uniform01(MixBits64(h ^ 1));
  const double u2 = Uniform01(MixBits64(h ^ 2));
  return config_.item_stddev * std::sqrt(-2.0 * std::log(u1)) *
         std::cos(2.0 * std::numbers::pi * u2);
}

double SyntheticSeq::Logit(const std::vector<int64_t>& history, int64_t candidate) const {
  const int category = Category(candidate);
  double matches = 0;
  double weight = 1;
  for (auto it = history.rbegin(); it != history.rend(); ++it) {  // the most recent first
    if (Category(*it) == category) matches += weight;
    weight *= config_.decay;
  }
  return config_.bias + config_.weight * matches + ItemWeight(candidate);
}

std::vector<SeqExample> SyntheticSeq::Generate(int64_t n, uint64_t stream) const {
  std::mt19937_64 engine(MixBits64(config_.seed * 0x9E3779B97F4A7C15ull + stream + 17));
  const auto uniform = [&]() { return Uniform01(engine()); };
  const auto below = [&](int64_t k) {
    return std::min<int64_t>(static_cast<int64_t>(uniform() * static_cast<double>(k)), k - 1);
  };
  const int c = config_.categories;
  std::vector<SeqExample> examples(n);
  for (SeqExample& e : examples) {
    const int interests[2] = {static_cast<int>(below(c)), static_cast<int>(below(c))};
    const auto draw = [&]() {
      const int category =
          uniform() < config_.interest ? interests[below(2)] : static_cast<int>(below(c));
      const std::vector<int64_t>& items = by_category_[category];
      return items[below(static_cast<int64_t>(items.size()))];
    };
    const int64_t length = 1 + below(config_.max_history);
    e.history.resize(length);
    for (int64_t& item : e.history) item = draw();
    e.candidate = draw();
    e.logit = Logit(e.history, e.candidate);
    e.label = uniform() < 1.0 / (1.0 + std::exp(-e.logit)) ? 1 : 0;
  }
  return examples;
}

std::string SyntheticSeq::Encode(const SeqExample& example) const {
  tf::Example proto;
  tf::Features* features = proto.mutable_features();
  AddInts(features, "label", {example.label});
  std::vector<int64_t> categories;
  for (int64_t item : example.history) categories.push_back(Category(item) + 1);
  AddInts(features, "hist", example.history);
  AddInts(features, "hist_cat", categories);
  AddInts(features, "cand", {example.candidate});
  AddInts(features, "cand_cat", {Category(example.candidate) + 1});
  return proto.SerializeAsString();
}

absl::Status SyntheticSeq::WriteTfRecords(Env* env, const std::string& path,
                                          const std::vector<SeqExample>& examples) const {
  absl::StatusOr<std::unique_ptr<AtomicWritableFile>> file = env->NewAtomicWritableFile(path);
  if (!file.ok()) return file.status();
  RecordWriter writer(file->get());
  for (const SeqExample& e : examples) {
    if (absl::Status s = writer.WriteRecord(Encode(e)); !s.ok()) return s;
  }
  return (*file)->Commit();
}

absl::StatusOr<SeqQuality> SyntheticSeq::Evaluate(const std::vector<SeqExample>& examples) {
  std::vector<double> probabilities;
  std::vector<float> labels;
  for (const SeqExample& e : examples) {
    probabilities.push_back(1.0 / (1.0 + std::exp(-e.logit)));
    labels.push_back(static_cast<float>(e.label));
  }
  SeqQuality q;
  q.examples = static_cast<int64_t>(examples.size());
  absl::StatusOr<double> auc = BinaryAuc(probabilities, labels);
  if (!auc.ok()) return auc.status();
  absl::StatusOr<double> loss = MeanLogLoss(probabilities, labels);
  if (!loss.ok()) return loss.status();
  q.auc = *auc;
  q.log_loss = *loss;
  for (float l : labels) q.base_rate += l;
  q.base_rate /= static_cast<double>(labels.size());
  return q;
}

}  // namespace pstrain
