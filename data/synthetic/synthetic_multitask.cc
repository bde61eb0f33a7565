#include "data/synthetic/synthetic_multitask.h"

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "data/binary_metrics.h"

namespace pstrain {
namespace {

// Random numbers by code here, not the implementation-defined std::
// distributions, so a seed gives the same rows everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double Normal() {
    const double u = 1.0 - Uniform();  // (0, 1]
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * Uniform());
  }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Uniform() * static_cast<double>(n)); }

 private:
  std::mt19937_64 engine_;
};

// A weight ~ N(0, 0.8^2) per (seed, table, id): the same whatever the stream.
double Weight(uint64_t seed, uint64_t table, int64_t id) {
  Random r(seed * 0x9E3779B97F4A7C15ull + table * 0xBF58476D1CE4E5B9ull +
           static_cast<uint64_t>(id) * 0x94D049BB133111EBull);
  return 0.8 * r.Normal();
}

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

}  // namespace

absl::StatusOr<MultitaskQuality> WriteSyntheticMultitaskCsv(Env* env, const std::string& path,
                                                            const SyntheticMultitaskConfig& config,
                                                            int64_t examples, uint64_t stream) {
  if (config.users < 1 || config.items < 1 || examples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic multitask: users ", config.users,
                                                   ", items ", config.items, " and examples ",
                                                   examples, " must be >= 1"));
  }
  std::vector<double> a(config.users + 1), c(config.users + 1), b(config.items + 1),
      d(config.items + 1);
  for (int64_t u = 1; u <= config.users; ++u) {
    a[u] = Weight(config.seed, 1, u);
    c[u] = Weight(config.seed, 2, u);
  }
  for (int64_t i = 1; i <= config.items; ++i) {
    b[i] = Weight(config.seed, 3, i);
    d[i] = 0.6 * b[i] + 0.8 * Weight(config.seed, 4, i);
  }
  Random r(config.seed * 1000003ull + stream + 1);
  std::string text = "user,item,price,hour,click,convert,dwell\n";
  std::vector<float> click_scores, convert_scores, clicks, converts;
  double squared = 0, click_sum = 0, convert_sum = 0;
  for (int64_t n = 0; n < examples; ++n) {
    const int64_t u = 1 + r.Below(config.users);
    const int64_t i = 1 + r.Below(config.items);
    // The price as written (cents), and z from it, so the CSV holds all.
    const double price = std::round(std::exp(3.0 + r.Normal()) * 100.0) / 100.0;
    const double z = std::log(price) - 3.0;
    const int64_t hour = r.Below(24);
    const double p_click = Sigmoid(-1.0 + a[u] + b[i] - 0.3 * z + (hour >= 18 ? 0.6 : 0.0));
    const double p_convert = Sigmoid(-0.5 + c[u] + d[i] - 0.8 * z);
    const int click = r.Uniform() < p_click ? 1 : 0;
    const int convert = click == 1 && r.Uniform() < p_convert ? 1 : 0;
    const double mean = 30.0 + 10.0 * (a[u] + b[i]);
    const double dwell = std::round((mean + 5.0 * r.Normal()) * 100.0) / 100.0;
    absl::StrAppend(&text, u, ",", i, ",", absl::StrFormat("%.2f", price), ",", hour, ",", click,
                    ",", convert, ",", absl::StrFormat("%.2f", dwell), "\n");
    click_scores.push_back(static_cast<float>(p_click));
    convert_scores.push_back(static_cast<float>(p_click * p_convert));
    clicks.push_back(click);
    converts.push_back(convert);
    squared += (dwell - mean) * (dwell - mean);
    click_sum += click;
    convert_sum += convert;
  }
  PSTRAIN_RETURN_IF_ERROR(env->WriteFileAtomic(path, text));
  MultitaskQuality q;
  q.examples = examples;
  // NaN when the rows hold one class only (a handful of rows).
  const absl::StatusOr<double> click_auc = BinaryAuc(click_scores, clicks);
  const absl::StatusOr<double> convert_auc = BinaryAuc(convert_scores, converts);
  q.click_auc = click_auc.ok() ? *click_auc : std::nan("");
  q.convert_auc = convert_auc.ok() ? *convert_auc : std::nan("");
  q.dwell_rmse = std::sqrt(squared / examples);
  q.click_rate = click_sum / examples;
  q.convert_rate = convert_sum / examples;
  return q;
}

}  // namespace pstrain
