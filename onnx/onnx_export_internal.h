#ifndef PSTRAIN_ONNX_ONNX_EXPORT_INTERNAL_H_
#define PSTRAIN_ONNX_ONNX_EXPORT_INTERNAL_H_

// Internal to onnx_export*.cc: the graph a model is written as, while it is
// built. onnx_export_graph.cc names nodes and initializers (GraphBuilder);
// onnx_export_layers.cc writes the spec's image and dense layers;
// onnx_export_sparse.cc the sparse features, their tables and the click
// models' layers; onnx_export_sequence.cc the sequence layers;
// onnx_export_multitask.cc mmoe and slice; onnx_export.cc checks the model
// and drives the build.

#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "config/model_spec.h"
#include "models/model.h"
#include "onnx/onnx.pb.h"
#include "onnx/onnx_export.h"

namespace pstrain {
namespace onnx_export_internal {

static_assert(std::endian::native == std::endian::little,
              "raw_data is little-endian: this writer copies floats as they are in memory");

// A sequence embedding's padding, as tensors of the graph: what its
// output's mask is in pstrain (Model's act_mask_, Layer::MadeLengths).
struct SequenceMask {
  std::string layer;        // the embedding that made it, for node names
  int64_t length = 0;       // L, the max_length
  std::string mask;         // float32 [N, L, 1]: 1 at an example's values, 0 at padding
  std::string count;        // int64 [N, 1]: the valid positions, min(values, L)
  std::string count_float;  // float32 [N, 1]: the same
  std::string keys;         // float32 [N, 1, 1, L]: `mask` for attention's scores, made when needed
};

// An activation of the graph: its tensor and pstrain's shape of one example
// ([h, w, c], held NCHW in the graph, [L, d] a sequence, or [features]),
// and for a sequence with padding its mask (null: none).
struct Activation {
  std::string tensor;
  Shape shape;
  std::shared_ptr<SequenceMask> mask = nullptr;
};

// Builds the graph. Names are unique in it: the variables' names, the input
// and outputs are kept for them, and a node whose name is taken (a layer named
// as another's node, "a/relu") gets "_1", "_2", ... appended.
class GraphBuilder {
 public:
  GraphBuilder(const Model& model, absl::Span<const float> params, absl::Span<const float> state,
               onnx::GraphProto* graph);

  // A node named `name` (or, if that is taken, `name`_k) whose one output
  // tensor has its name. `exact`: one of the reserved names, used once.
  onnx::NodeProto* Node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs, bool exact = false);

  // The pstrain variable `name` as an initializer of `dims`, its values
  // reordered by `index` (the variable's element for each of the
  // initializer's, in order) or as they are.
  absl::StatusOr<std::string> Variable(const std::string& name, const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>* index = nullptr);

  // Constant initializers that are no pstrain variable, named `name` or
  // `name`_k; the name given.
  std::string FloatScalar(const std::string& name, float value);
  std::string Int64s(const std::string& name, const std::vector<int64_t>& values);
  // A scalar int64 initializer (Pad's constant_value).
  std::string Int64Scalar(const std::string& name, int64_t value);

  // An initializer `name` (a reserved name: a table's) of `dims` holding
  // `raw` (little-endian values of `data_type`).
  void RawInitializer(const std::string& name, int32_t data_type, const std::vector<int64_t>& dims,
                      std::string raw);

  // Shared constants, made once: "constants/<name>".
  std::string Int64Constant(const std::string& name, const std::vector<int64_t>& values);
  std::string FloatConstant(const std::string& name, float value);

  // Marks a reserved `name` used (the graph input's, a variable's).
  std::string Claim(const std::string& name) {
    used_.insert(name);
    return name;
  }

  const std::string& model_name() const { return model_.name(); }

 private:
  std::string UniqueName(const std::string& name);

  const Model& model_;
  absl::Span<const float> params_, state_;
  onnx::GraphProto* graph_;
  std::map<std::string, const VariableInfo*> variables_;
  std::set<std::string> reserved_;  // names kept for one use: variables, input, outputs
  std::set<std::string> used_;
  std::map<std::string, std::string> constants_;  // Int64Constant's and FloatConstant's
};

// Attributes of `node`.
void SetInt(onnx::NodeProto* node, const char* name, int64_t value);
void SetFloat(onnx::NodeProto* node, const char* name, float value);
void SetInts(onnx::NodeProto* node, const char* name, const std::vector<int64_t>& values);

// A value_info's type: float32 or int64 with these dims, a negative one
// symbolic: "N" for the first, `second_symbol` for another.
void SetTensorType(onnx::ValueInfoProto* info, const std::string& name, int32_t elem_type,
                   const std::vector<int64_t>& dims, const std::string& second_symbol = "");

// InvalidArgument: "ONNX export of <model>: layer <l> (<type>, line <n>) `what`".
absl::Status LayerError(const GraphBuilder& b, const LayerSpec& l, const std::string& what);

// --- Image and dense layers (onnx_export_layers.cc) ---

// An activation function after a conv2d or dense layer's output `x` (the
// spec's `activation:`), or `x` for none.
absl::StatusOr<Activation> AddActivation(GraphBuilder& b, const LayerSpec& l, Activation x);

// The layer `l` on its inputs `in` (already checked to be one, or two and
// more for add and concat).
absl::StatusOr<Activation> AddLayer(GraphBuilder& b, const LayerSpec& l,
                                    const std::vector<Activation>& in);

// tf.image.per_image_standardization as pstrain does it (data/augment.h), on
// the NHWC images: (x - mean) / max(stddev, 1 / (255 sqrt(n))).
std::string AddStandardization(GraphBuilder& b, const std::string& images, int64_t n);

// --- Sparse features and embedding tables (onnx_export_sparse.cc) ---

// The graph's inputs for the sparse features, the tables' initializers, and
// per feature the nodes every layer that reads it shares (made when first
// needed, named "<feature>/...").
class SparseGraph {
 public:
  SparseGraph(GraphBuilder& b, const Model& model);

  // One int64 input [N, "<feature>_len"] per sparse feature.
  void AddInputs(onnx::GraphProto* graph);

  // Each table as an initializer [buckets, dim] of its trained rows, zeros
  // elsewhere. InvalidArgument for rows that do not fit it.
  absl::Status AddTables(absl::Span<const TrainedTableRows> tables);

  // The table named `name` and its feature's input; null when the model has
  // no such table (its spec does not describe it).
  const SparseTableInfo* Table(const std::string& name);

  // Unimplemented for a table no layer looked up: one the export would
  // leave out (a kind of table it does not know).
  absl::Status CheckEveryTableUsed() const;

  // [N, L]: the ids with the -1 padding as 0, to gather from.
  std::string Ids(int feature);

  // [N, L, 1]: 1 for an id, 0 for the padding.
  std::string Mask(int feature);

  // [N, 1]: what the sum of an example's rows is divided by: max(count, 1)
  // for the mean, its square root for sqrtn.
  std::string Divisor(int feature, bool sqrt);

  // [N, dim]: the sum over L of the table's rows at `feature`'s ids, the
  // padding masked out; nodes "<prefix>/rows", "<prefix>/masked" and `sum`.
  std::string SumOfRows(const SparseTableInfo& table, int feature, const std::string& prefix,
                        const std::string& sum);

  // The feature's index in Model::sparse_features(), -1 if it has none.
  int FeatureIndex(const std::string& name) const;

  // [N, 1] float32: the number of ids of each example.
  std::string Count(int feature);

 private:
  struct FeatureNodes {
    std::string ids, valid, mask, count, count_at_least_1, sqrt_count;
  };

  // [N, L] float32: 1 for an id, 0 for the padding.
  std::string Valid(int feature);

  GraphBuilder& b_;
  const Model& model_;
  std::map<std::string, int> table_of_;
  std::set<int> used_;  // tables Table() gave
  std::vector<FeatureNodes> features_;
};

// embedding: the combiner over the rows of the example's ids, or with
// `sequence:` the rows of its last L ids (AddSequenceEmbedding).
absl::StatusOr<Activation> AddEmbedding(GraphBuilder& b, SparseGraph& sparse, const LayerSpec& l);

// linear: per feature the sum of its weights at the example's ids, summed,
// plus the bias.
absl::StatusOr<Activation> AddLinear(GraphBuilder& b, SparseGraph& sparse, const LayerSpec& l);

// dot_interaction: x_0 followed by x_i . x_j for i > j, in DLRM's order,
// from the [k, k] Gram matrix of the stacked inputs.
absl::StatusOr<Activation> AddDotInteraction(GraphBuilder& b, const LayerSpec& l,
                                             const std::vector<Activation>& in);

// --- Sequences (onnx_export_sequence.cc) ---

// embedding with `sequence: {max_length: L}` reading `table` with the ids of
// `feature`: [N, L, dim], each example's last L ids in order (padding after
// them), its positions' rows added, and its mask.
absl::StatusOr<Activation> AddSequenceEmbedding(GraphBuilder& b, SparseGraph& sparse,
                                                const LayerSpec& l, const SparseTableInfo& table,
                                                int feature);

// multi_head_attention over in[0] with the query in[1] (or in[0]).
absl::StatusOr<Activation> AddAttention(GraphBuilder& b, const LayerSpec& l,
                                        const std::vector<Activation>& in);

// sequence_pool over its valid positions.
absl::StatusOr<Activation> AddSequencePool(GraphBuilder& b, const LayerSpec& l,
                                           const Activation& x);

// din_attention: a history in[0] [L, d] weighed against a candidate in[1] [d].
absl::StatusOr<Activation> AddDinAttention(GraphBuilder& b, const LayerSpec& l,
                                           const std::vector<Activation>& in);

// --- Multi-task layers (onnx_export_multitask.cc) ---

// mmoe: each expert's Gemm and Relu nodes, each gate's Gemm and Softmax,
// and every task's mixture as one MatMul of the stacked gates [N, tasks,
// experts] and experts [N, experts, u], flattened to [N, tasks * u].
absl::StatusOr<Activation> AddMmoe(GraphBuilder& b, const LayerSpec& l, const Activation& x);

// slice: Slice of [begin, begin + size) on the features' axis.
absl::StatusOr<Activation> AddSlice(GraphBuilder& b, const LayerSpec& l, const Activation& x);

}  // namespace onnx_export_internal
}  // namespace pstrain

#endif  // PSTRAIN_ONNX_ONNX_EXPORT_INTERNAL_H_
