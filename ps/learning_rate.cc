#include "ps/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

absl::Status CheckRate(float value, size_t index) {
  if (!std::isfinite(value) || value < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate ", index, " is ", value, "; it must be finite and >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

LearningRateSchedule::LearningRateSchedule() : values_{0.001f} {}

LearningRateSchedule::LearningRateSchedule(std::vector<int64_t> boundaries,
                                           std::vector<float> values)
    : boundaries_(std::move(boundaries)), values_(std::move(values)) {}

absl::StatusOr<LearningRateSchedule> LearningRateSchedule::Constant(float value) {
  return Piecewise({}, {value});
}

absl::StatusOr<LearningRateSchedule> LearningRateSchedule::Piecewise(
    std::vector<int64_t> boundaries, std::vector<float> values) {
  if (values.size() != boundaries.size() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a piecewise learning rate needs one more value than boundaries; got ",
                     boundaries.size(), " boundaries and ", values.size(), " values"));
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "learning rate boundaries must be strictly increasing; boundary ", i, " (", boundaries[i],
          ") is not greater than boundary ", i - 1, " (", boundaries[i - 1], ")"));
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    PSTRAIN_RETURN_IF_ERROR(CheckRate(values[i], i));
  }
  return LearningRateSchedule(std::move(boundaries), std::move(values));
}

float LearningRateSchedule::At(int64_t step) const {
  // The first boundary >= step selects the value: a step equal to a boundary
  // belongs to the piece that ends there, as in tf.train.piecewise_constant.
  const auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), step);
  return values_[it - boundaries_.begin()];
}

std::string LearningRateSchedule::ToString() const {
  std::string out;
  for (size_t i = 0; i < boundaries_.size(); ++i) {
    absl::StrAppend(&out, values_[i], " until step ", boundaries_[i], ", ");
  }
  if (!boundaries_.empty()) absl::StrAppend(&out, "then ");
  absl::StrAppend(&out, values_.back());
  return out;
}

absl::StatusOr<LearningRateSchedule> ParseLearningRateSchedule(float base_lr,
                                                               const std::string& spec) {
  if (!std::isfinite(base_lr) || base_lr < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("base learning rate is ", base_lr, "; it must be finite and >= 0"));
  }
  std::vector<int64_t> boundaries;
  std::vector<float> values = {base_lr};
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return LearningRateSchedule::Piecewise(std::move(boundaries), std::move(values));
  }
  for (absl::string_view piece : absl::StrSplit(spec, ',')) {
    const absl::string_view token = absl::StripAsciiWhitespace(piece);
    const std::vector<absl::string_view> parts = absl::StrSplit(token, ':');
    int64_t boundary = 0;
    float factor = 0.0f;
    if (parts.size() != 2 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[0]), &boundary) ||
        !absl::SimpleAtof(absl::StripAsciiWhitespace(parts[1]), &factor)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad learning rate schedule token \"", token, "\" in \"", spec,
                       "\"; expected comma-separated step:factor pairs such as "
                       "\"1000:0.1,2000:0.01\""));
    }
    if (!boundaries.empty() && boundary <= boundaries.back()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "learning rate schedule token \"", token, "\" in \"", spec,
          "\": steps must be strictly increasing, but ", boundary, " follows ", boundaries.back()));
    }
    const float value = base_lr * factor;
    if (!std::isfinite(factor) || factor < 0.0f || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("learning rate schedule token \"", token,
                                                     "\" in \"", spec,
                                                     "\": the factor must be finite and >= 0"));
    }
    boundaries.push_back(boundary);
    values.push_back(value);
  }
  return LearningRateSchedule::Piecewise(std::move(boundaries), std::move(values));
}

}  // namespace pstrain
