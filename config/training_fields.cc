#include "config/training_fields.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/float_text.h"
#include "config/config_yaml_util.h"

namespace pstrain {
namespace config_internal {
namespace {

const Field kFields[] = {
    {"model", &TrainingSpec::model},
    {"onnx_weights", &TrainingSpec::onnx_weights},
    {"num_layers", &TrainingSpec::num_layers},
    {"batch_norm_decay", &TrainingSpec::batch_norm_decay},
    {"batch_norm_epsilon", &TrainingSpec::batch_norm_epsilon},
    {"use_distortion_for_training", &TrainingSpec::use_distortion_for_training},
    {"data_dir", &TrainingSpec::data_dir},
    {"train_files", &TrainingSpec::train_files},
    {"eval_files", &TrainingSpec::eval_files},
    {"input_compression", &TrainingSpec::input_compression},
    {"shuffle_buffer", &TrainingSpec::shuffle_buffer},
    {"shuffle_files", &TrainingSpec::shuffle_files},
    {"cycle_length", &TrainingSpec::cycle_length},
    {"num_epochs", &TrainingSpec::num_epochs},
    {"csv_schema", &TrainingSpec::csv_schema},
    {"max_bad_records", &TrainingSpec::max_bad_records},
    {"follow", &TrainingSpec::follow},
    {"poll_secs", &TrainingSpec::poll_secs},
    {"progressive_validation", &TrainingSpec::progressive_validation},
    {"progressive_window", &TrainingSpec::progressive_window},
    {"job_dir", &TrainingSpec::job_dir},
    {"update", &TrainingSpec::update},
    {"staleness", &TrainingSpec::staleness},
    {"replicas_to_aggregate", &TrainingSpec::replicas_to_aggregate},
    {"total_replicas", &TrainingSpec::total_replicas},
    {"chief_trains", &TrainingSpec::chief_trains},
    {"optimizer", &TrainingSpec::optimizer},
    {"learning_rate", &TrainingSpec::learning_rate},
    {"learning_rate_schedule", &TrainingSpec::learning_rate_schedule},
    {"momentum", &TrainingSpec::momentum},
    {"nesterov", &TrainingSpec::nesterov},
    {"weight_decay", &TrainingSpec::weight_decay},
    {"weight_decay_exclusions", &TrainingSpec::weight_decay_exclusions},
    {"embedding_optimizer", &TrainingSpec::embedding_optimizer},
    {"embedding_learning_rate", &TrainingSpec::embedding_learning_rate},
    {"embedding_l1", &TrainingSpec::embedding_l1},
    {"embedding_l2", &TrainingSpec::embedding_l2},
    {"embedding_ttl_steps", &TrainingSpec::embedding_ttl_steps},
    {"embedding_min_count", &TrainingSpec::embedding_min_count},
    {"batch_size", &TrainingSpec::batch_size},
    {"eval_batch_size", &TrainingSpec::eval_batch_size},
    {"train_steps", &TrainingSpec::train_steps},
    {"eval_steps", &TrainingSpec::eval_steps},
    {"log_every_n_steps", &TrainingSpec::log_every_n_steps},
    {"seed", &TrainingSpec::seed},
    {"sync_timeout", &TrainingSpec::sync_timeout},
    {"startup_timeout", &TrainingSpec::startup_timeout},
    {"ps_retry_secs", &TrainingSpec::ps_retry_secs},
    {"watchdog_secs", &TrainingSpec::watchdog_secs},
    {"ps_replication", &TrainingSpec::ps_replication},
    {"failover_secs", &TrainingSpec::failover_secs},
    {"checkpoint_steps", &TrainingSpec::checkpoint_steps},
    {"checkpoint_secs", &TrainingSpec::checkpoint_secs},
    {"keep_checkpoint_max", &TrainingSpec::keep_checkpoint_max},
    {"exports_to_keep", &TrainingSpec::exports_to_keep},
    {"export_steps", &TrainingSpec::export_steps},
    {"export_secs", &TrainingSpec::export_secs},
    {"full_export_every", &TrainingSpec::full_export_every},
    {"shutdown_grace_secs", &TrainingSpec::shutdown_grace_secs},
    {"save_summary_steps", &TrainingSpec::save_summary_steps},
    {"histogram_steps", &TrainingSpec::histogram_steps},
    {"projector_rows", &TrainingSpec::projector_rows},
    {"flush_secs", &TrainingSpec::flush_secs},
    {"threads", &TrainingSpec::threads},
    {"wire_format", &TrainingSpec::wire_format},
    {"compression", &TrainingSpec::compression},
    {"compression_ratio", &TrainingSpec::compression_ratio},
    {"overlap_pull", &TrainingSpec::overlap_pull},
    {"trace_steps", &TrainingSpec::trace_steps},
    {"tls_dir", &TrainingSpec::tls_dir},
    {"token_file", &TrainingSpec::token_file},
    {"insecure", &TrainingSpec::insecure},
};

// "train-steps" -> "train_steps".
std::string NormalizeKey(std::string_view key) {
  std::string normalized(key);
  std::replace(normalized.begin(), normalized.end(), '-', '_');
  return normalized;
}

// Parsers from a value's string form; false if it does not parse. Each has a
// description for the message "... is not <description>".
bool ParseScalar(std::string_view s, std::string* out) {
  *out = std::string(s);
  return true;
}
bool ParseScalar(std::string_view s, int* out) { return absl::SimpleAtoi(Sv(s), out); }
bool ParseScalar(std::string_view s, int64_t* out) { return absl::SimpleAtoi(Sv(s), out); }
bool ParseScalar(std::string_view s, uint64_t* out) {
  // SimpleAtoi would read "-1" as 2^64 - 1.
  if (s.find('-') != std::string_view::npos) return false;
  return absl::SimpleAtoi(Sv(s), out);
}
bool ParseScalar(std::string_view s, double* out) {
  return absl::SimpleAtod(Sv(s), out) && std::isfinite(*out);
}
bool ParseScalar(std::string_view s, bool* out) {
  const std::string lower = absl::AsciiStrToLower(Sv(s));
  if (lower == "true" || lower == "yes" || lower == "1") {
    *out = true;
  } else if (lower == "false" || lower == "no" || lower == "0") {
    *out = false;
  } else {
    return false;
  }
  return true;
}
bool ParseScalar(std::string_view s, UpdateMode* out) {
  absl::StatusOr<UpdateMode> mode = ParseUpdateMode(s);
  if (!mode.ok()) return false;
  *out = *mode;
  return true;
}

const char* Description(const int*) { return "an integer"; }
const char* Description(const int64_t*) { return "an integer"; }
const char* Description(const uint64_t*) { return "a non-negative integer"; }
const char* Description(const double*) { return "a finite number"; }
const char* Description(const bool*) { return "true or false"; }
const char* Description(const UpdateMode*) { return "an update mode (async, sync or ssp)"; }
const char* Description(const std::string*) { return "a string"; }

std::string FormatScalar(const std::string& v) { return v; }
std::string FormatScalar(int v) { return absl::StrCat(v); }
std::string FormatScalar(int64_t v) { return absl::StrCat(v); }
std::string FormatScalar(uint64_t v) { return absl::StrCat(v); }
std::string FormatScalar(bool v) { return v ? "true" : "false"; }
std::string FormatScalar(UpdateMode v) { return std::string(UpdateModeName(v)); }
std::string FormatScalar(double v) { return FormatDouble(v); }

}  // namespace

const Field* FindField(std::string_view key) {
  // TensorFlow's names are accepted too (tf.estimator.RunConfig's, the
  // tutorials' flags).
  const std::string normalized(CanonicalFlagName(NormalizeKey(key)));
  for (const Field& field : kFields) {
    if (normalized == field.name) return &field;
  }
  return nullptr;
}

absl::Status UnknownTrainingKey(std::string_view key) {
  return absl::InvalidArgumentError(UnknownKeyMessage("training.", key, TrainingFieldNames()));
}

std::string FormatDouble(double v) { return ShortestDoubleText(v); }

bool IsBoolField(const Field& field) {
  return std::holds_alternative<bool TrainingSpec::*>(field.ptr);
}
bool IsStringField(const Field& field) {
  return std::holds_alternative<std::string TrainingSpec::*>(field.ptr);
}

absl::Span<const Field> TrainingFields() { return kFields; }

std::string FormatField(const TrainingSpec& spec, const Field& field) {
  return std::visit([&](auto member) { return FormatScalar(spec.*member); }, field.ptr);
}

}  // namespace config_internal

using config_internal::Description;
using config_internal::Field;
using config_internal::FindField;
using config_internal::FormatScalar;
using config_internal::kFields;
using config_internal::ParseScalar;
using config_internal::Quoted;
using config_internal::UnknownTrainingKey;

absl::StatusOr<UpdateMode> ParseUpdateMode(std::string_view name) {
  if (name == "async") return UpdateMode::kAsync;
  if (name == "sync") return UpdateMode::kSync;
  if (name == "ssp") return UpdateMode::kSsp;
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(name), " is not an update mode; use async, sync or ssp"));
}

std::string_view UpdateModeName(UpdateMode mode) {
  switch (mode) {
    case UpdateMode::kAsync:
      return "async";
    case UpdateMode::kSync:
      return "sync";
    case UpdateMode::kSsp:
      return "ssp";
  }
  return "unknown";
}

absl::Status SetTrainingField(TrainingSpec* spec, std::string_view key, std::string_view value) {
  const Field* field = FindField(key);
  if (field == nullptr) return UnknownTrainingKey(key);
  return std::visit(
      [&](auto member) -> absl::Status {
        using T = std::remove_reference_t<decltype(spec->*member)>;
        T parsed{};
        if (!ParseScalar(value, &parsed)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "training.", field->name, ": ", Quoted(value), " is not ", Description(&parsed)));
        }
        spec->*member = std::move(parsed);
        // A model named anew replaces the spec the job had.
        if (std::string_view(field->name) == "model") {
          spec->model_spec.reset();
        }
        return absl::OkStatus();
      },
      field->ptr);
}

absl::StatusOr<std::string> GetTrainingField(const TrainingSpec& spec, std::string_view key) {
  const Field* field = FindField(key);
  if (field == nullptr) return UnknownTrainingKey(key);
  return std::visit([&](auto member) { return FormatScalar(spec.*member); }, field->ptr);
}

std::vector<std::string> TrainingFieldNames() {
  std::vector<std::string> names;
  for (const Field& field : kFields) names.emplace_back(field.name);
  return names;
}

}  // namespace pstrain
