#include "ps/optimizer.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"
#include "tbb/partitioner.h"

namespace pstrain {
namespace {

// Elements per parallel task: large enough that scheduling costs nothing next
// to the memory traffic, small enough that a ~3M-element slice gives every
// core dozens of tasks to balance.
constexpr int64_t kBlock = 64 * 1024;

// The kernels below are plain loops over restrict pointers so that g++ -O3
// vectorizes each one into a single pass over memory (the update is
// memory-bound: Adam reads 4 and writes 3 floats per element). The build
// passes -fno-math-errno for this file so std::sqrt vectorizes too. The
// weight-decay branch is a template parameter rather than `g + 0 * p`, which
// would turn an infinite parameter into NaN where TensorFlow would not.

template <bool kDecay>
void SgdKernel(int64_t n, float lr, float wd, const float* __restrict g, float* __restrict p) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    if constexpr (kDecay) gi += wd * p[i];
    p[i] -= lr * gi;
  }
}

template <bool kDecay, bool kNesterov>
void MomentumKernel(int64_t n, float lr, float wd, float momentum, const float* __restrict g,
                    float* __restrict p, float* __restrict accum) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    if constexpr (kDecay) gi += wd * p[i];
    const float a = momentum * accum[i] + gi;
    accum[i] = a;
    if constexpr (kNesterov) {
      p[i] -= lr * (gi + momentum * a);
    } else {
      p[i] -= lr * a;
    }
  }
}

struct AdamCoefficients {
  float lr_t;  // learning rate with bias correction folded in
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float epsilon;
};

template <bool kDecay>
void AdamKernel(int64_t n, const AdamCoefficients& c, float wd, const float* __restrict g,
                float* __restrict p, float* __restrict m, float* __restrict v) {
  const AdamCoefficients k = c;  // local copy: no aliasing doubts for the vectorizer
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    if constexpr (kDecay) gi += wd * p[i];
    const float mi = k.beta1 * m[i] + k.one_minus_beta1 * gi;
    const float vi = k.beta2 * v[i] + k.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= k.lr_t * mi / (std::sqrt(vi) + k.epsilon);
  }
}

absl::Status CheckFiniteNonNegative(const char* name, float value) {
  if (!std::isfinite(value) || value < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer ", name, " is ", value, "; it must be finite and >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckBeta(const char* name, float value) {
  if (!(value >= 0.0f && value < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Adam ", name, " is ", value, "; it must be in [0, 1)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const OptimizerConfig& config) {
  PSTRAIN_RETURN_IF_ERROR(CheckFiniteNonNegative("weight_decay", config.weight_decay));
  for (const std::string& exclusion : config.weight_decay_exclusions) {
    if (exclusion.empty()) {
      return absl::InvalidArgumentError(
          "an empty weight_decay_exclusions entry would match every variable; remove it");
    }
  }
  switch (config.type) {
    case OptimizerType::kSgd:
      return absl::OkStatus();
    case OptimizerType::kMomentum:
      return CheckFiniteNonNegative("momentum", config.momentum);
    case OptimizerType::kAdam:
      PSTRAIN_RETURN_IF_ERROR(CheckBeta("beta1", config.beta1));
      PSTRAIN_RETURN_IF_ERROR(CheckBeta("beta2", config.beta2));
      if (!std::isfinite(config.epsilon) || config.epsilon <= 0.0f) {
        return absl::InvalidArgumentError(
            absl::StrCat("Adam epsilon is ", config.epsilon, "; it must be finite and > 0"));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer type ", static_cast<int>(config.type)));
}

absl::Status ValidateSegments(const std::vector<Segment>& segments, int64_t size) {
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("slice size is ", size, "; it must be >= 0"));
  }
  int64_t covered = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (s.begin != covered) {
      return absl::InvalidArgumentError(absl::StrCat(
          "segment ", i, " (variable \"", s.variable, "\") begins at ", s.begin, " but ",
          i == 0 ? "the slice starts at 0" : absl::StrCat("segment ", i - 1, " ends at ", covered),
          "; segments must tile [0, ", size, ") in order without gaps or overlaps"));
    }
    if (s.end < s.begin) {
      return absl::InvalidArgumentError(absl::StrCat("segment ", i, " (variable \"", s.variable,
                                                     "\") ends at ", s.end, " before it begins at ",
                                                     s.begin));
    }
    covered = s.end;
  }
  if (covered != size) {
    return absl::InvalidArgumentError(absl::StrCat("segments cover [0, ", covered,
                                                   ") but the slice has size ", size,
                                                   "; they must tile it exactly"));
  }
  return absl::OkStatus();
}

// An exclusion with a wildcard (* ? [) is a pattern the whole name must
// match, as the shell's ("*/kernel" but not "stage1/*/kernel/x"; '*'
// crosses '/'); any other is a part of the name ("bias").
bool Excluded(const std::string& variable, const std::vector<std::string>& exclusions) {
  return std::any_of(exclusions.begin(), exclusions.end(), [&](const std::string& e) {
    if (e.find_first_of("*?[") != std::string::npos) {
      return fnmatch(e.c_str(), variable.c_str(), 0) == 0;
    }
    return absl::StrContains(variable, e);
  });
}

}  // namespace

absl::StatusOr<OptimizerType> ParseOptimizerType(std::string_view name) {
  // Debian's abseil has its own string_view type, distinct from std's.
  const absl::string_view view(name.data(), name.size());
  const std::string lower = absl::AsciiStrToLower(view);
  if (lower == "sgd") return OptimizerType::kSgd;
  if (lower == "momentum") return OptimizerType::kMomentum;
  if (lower == "adam") return OptimizerType::kAdam;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer \"", view, "\"; valid names are sgd, momentum, adam"));
}

std::string_view OptimizerTypeName(OptimizerType type) {
  switch (type) {
    case OptimizerType::kSgd:
      return "sgd";
    case OptimizerType::kMomentum:
      return "momentum";
    case OptimizerType::kAdam:
      return "adam";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config,
                                                             std::vector<Segment> segments,
                                                             int64_t size) {
  PSTRAIN_RETURN_IF_ERROR(ValidateConfig(config));
  PSTRAIN_RETURN_IF_ERROR(ValidateSegments(segments, size));
  return std::unique_ptr<Optimizer>(new Optimizer(config, std::move(segments), size));
}

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<Segment> segments, int64_t size)
    : config_(config), segments_(std::move(segments)), size_(size) {
  for (const Segment& s : segments_) {
    // A frozen variable is in no run: nothing updates it.
    if (s.begin == s.end || s.frozen) continue;
    const bool decay =
        config_.weight_decay > 0.0f && !Excluded(s.variable, config_.weight_decay_exclusions);
    if (!runs_.empty() && runs_.back().decay == decay && runs_.back().end == s.begin) {
      runs_.back().end = s.end;
    } else {
      runs_.push_back({s.begin, s.end, decay});
    }
  }
  switch (config_.type) {
    case OptimizerType::kSgd:
      break;
    case OptimizerType::kMomentum:
      slot_names_ = {"momentum"};
      break;
    case OptimizerType::kAdam:
      slot_names_ = {"m", "v"};
      break;
  }
  slots_.resize(slot_names_.size(), std::vector<float>(size_, 0.0f));
}

bool Optimizer::LeavesParamsUnchanged(const float* grad) const {
  if (runs_.empty()) return true;
  if (config_.type != OptimizerType::kSgd) return false;
  for (const Run& run : runs_) {
    if (run.decay) return false;
    for (int64_t i = run.begin; i < run.end; ++i) {
      if (grad[i] != 0.0f) return false;  // NaN included
    }
  }
  return true;
}

const std::string& Optimizer::slot_name(int i) const {
  CHECK_GE(i, 0);
  CHECK_LT(i, num_slots());
  return slot_names_[i];
}

float* Optimizer::slot(int i) {
  CHECK_GE(i, 0);
  CHECK_LT(i, num_slots());
  return slots_[i].data();
}

const float* Optimizer::slot(int i) const {
  CHECK_GE(i, 0);
  CHECK_LT(i, num_slots());
  return slots_[i].data();
}

void Optimizer::set_adam_step(int64_t step) {
  CHECK_GE(step, 0) << "Adam step count must be >= 0";
  adam_step_ = step;
}

template <typename Kernel>
void Optimizer::ForEachRun(int64_t lo, int64_t hi, const Kernel& kernel) const {
  // First run that ends after lo; runs are sorted and non-empty.
  auto it = std::upper_bound(runs_.begin(), runs_.end(), lo,
                             [](int64_t x, const Run& r) { return x < r.end; });
  for (; it != runs_.end() && it->begin < hi; ++it) {
    kernel(std::max(lo, it->begin), std::min(hi, it->end), it->decay);
  }
}

void Optimizer::Apply(int64_t global_step, const float* grad, float* params) {
  CHECK(size_ == 0 || (grad != nullptr && params != nullptr))
      << "Optimizer::Apply needs grad and params for " << size_ << " floats";
  const float lr = config_.learning_rate.At(global_step);
  const float wd = config_.weight_decay;

  // Each task calls the kernel on [b, e) pieces of its block; the lambdas
  // capture by reference, so nothing is allocated here (TBB's own task
  // objects come from its internal pools).
  const auto run_in_parallel = [&](const auto& kernel) {
    if (size_ == 0) return;
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, size_, kBlock),
        [&](const tbb::blocked_range<int64_t>& r) { ForEachRun(r.begin(), r.end(), kernel); },
        tbb::simple_partitioner());
  };

  switch (config_.type) {
    case OptimizerType::kSgd:
      run_in_parallel([&](int64_t b, int64_t e, bool decay) {
        const auto kernel = decay ? &SgdKernel<true> : &SgdKernel<false>;
        kernel(e - b, lr, wd, grad + b, params + b);
      });
      break;
    case OptimizerType::kMomentum: {
      const float momentum = config_.momentum;
      const bool nesterov = config_.nesterov;
      float* accum = slots_[0].data();
      run_in_parallel([&](int64_t b, int64_t e, bool decay) {
        const auto kernel =
            decay ? (nesterov ? &MomentumKernel<true, true> : &MomentumKernel<true, false>)
                  : (nesterov ? &MomentumKernel<false, true> : &MomentumKernel<false, false>);
        kernel(e - b, lr, wd, momentum, grad + b, params + b, accum + b);
      });
      break;
    }
    case OptimizerType::kAdam: {
      ++adam_step_;
      // Bias correction in double: 1 - beta^t loses most of its digits in
      // float once t is large and beta is close to 1.
      const double t = static_cast<double>(adam_step_);
      const double beta1 = config_.beta1;
      const double beta2 = config_.beta2;
      AdamCoefficients c;
      c.lr_t =
          static_cast<float>(lr * std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t)));
      c.beta1 = config_.beta1;
      c.one_minus_beta1 = 1.0f - config_.beta1;
      c.beta2 = config_.beta2;
      c.one_minus_beta2 = 1.0f - config_.beta2;
      c.epsilon = config_.epsilon;
      float* m = slots_[0].data();
      float* v = slots_[1].data();
      run_in_parallel([&](int64_t b, int64_t e, bool decay) {
        const auto kernel = decay ? &AdamKernel<true> : &AdamKernel<false>;
        kernel(e - b, c, wd, grad + b, params + b, m + b, v + b);
      });
      break;
    }
  }
}

}  // namespace pstrain
