#ifndef PSTRAIN_CONFIG_MODEL_SPEC_GRAPH_H_
#define PSTRAIN_CONFIG_MODEL_SPEC_GRAPH_H_

// Internal to model_spec*.cc: the checks on a parsed spec's layers as a
// whole (names, tables, crosses, the graph their inputs make), after each
// layer is read on its own (model_spec.cc).

#include <vector>

#include "absl/status/status.h"
#include "config/config_yaml_util.h"
#include "config/model_spec.h"

namespace pstrain {
namespace model_spec_internal {

// Names the layers without one, Keras' way (conv2d, conv2d_1, ...), skipping
// names given explicitly; refuses a name given twice.
absl::Status NameLayers(const config_internal::Source& source, std::vector<LayerSpec>* layers);

// An embedding's or linear's table is either bucketed or dynamic.
absl::Status CheckTables(const config_internal::Source& source,
                         const std::vector<LayerSpec>& layers);

// A linear's crosses: each of two or more distinct features, no two of the
// same features (in whatever order), and each table's name its own (a feature
// "a_X_b" and a cross [a, b] would share one). The layer's table name of a
// cross is models/embedding.h's CrossTableName.
absl::Status CheckCrosses(const config_internal::Source& source,
                          const std::vector<LayerSpec>& layers);

// Every name a layer takes is "input" or an earlier layer's, and every
// layer's output but the last is taken by a later one. With `heads`, a
// layer's output may be a head's input instead, the last layer's too.
absl::Status CheckGraph(const config_internal::Source& source, const std::vector<LayerSpec>& layers,
                        const std::vector<HeadSpec>& heads = {});

// Reads `heads:` (a list of maps) into `heads`, checking each on its own.
absl::Status ParseHeads(const config_internal::Source& source, const YAML::Node& node,
                        std::vector<HeadSpec>* heads);

// The heads against the layers: every input a layer's name, no layer the
// input of two heads, no label used twice.
absl::Status CheckHeads(const config_internal::Source& source, const std::vector<LayerSpec>& layers,
                        const std::vector<HeadSpec>& heads);

}  // namespace model_spec_internal
}  // namespace pstrain

#endif  // PSTRAIN_CONFIG_MODEL_SPEC_GRAPH_H_
