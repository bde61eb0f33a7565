#ifndef PSTRAIN_CONFIG_TRAINING_FIELDS_H_
#define PSTRAIN_CONFIG_TRAINING_FIELDS_H_

// Internal to config/: the table of TrainingSpec fields behind
// SetTrainingField / GetTrainingField, for the YAML parsers and writer and
// the validation.

#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "config/cluster_config.h"

namespace pstrain {
namespace config_internal {

using FieldPtr =
    std::variant<std::string TrainingSpec::*, int TrainingSpec::*, int64_t TrainingSpec::*,
                 uint64_t TrainingSpec::*, double TrainingSpec::*, bool TrainingSpec::*,
                 UpdateMode TrainingSpec::*>;

struct Field {
  const char* name;
  FieldPtr ptr;
};

// Every field, in TrainingSpec's declaration order (the order JobConfigToYaml
// writes).
absl::Span<const Field> TrainingFields();

// The field `key` names (underscores or hyphens, TensorFlow's names too), or
// nullptr.
const Field* FindField(std::string_view key);

// InvalidArgument "unknown key training.<key>" with a suggestion.
absl::Status UnknownTrainingKey(std::string_view key);

// The value's string form, which SetTrainingField parses back to itself.
std::string FormatField(const TrainingSpec& spec, const Field& field);
// Shortest representation that reads back as the same double.
std::string FormatDouble(double v);

bool IsBoolField(const Field& field);
bool IsStringField(const Field& field);

}  // namespace config_internal
}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_TRAINING_FIELDS_H_
