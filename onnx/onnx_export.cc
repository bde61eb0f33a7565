#include "onnx/onnx_export.h"

#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "config/model_spec.h"
#include "models/conv2d.h"
#include "models/spec_builder.h"
#include "onnx/onnx.pb.h"

namespace pstrain {
namespace {

static_assert(std::endian::native == std::endian::little,
              "raw_data is little-endian: this writer copies floats as they are in memory");

// An activation of the graph: its tensor and pstrain's shape of one example
// ([h, w, c], held NCHW in the graph, or [features]).
struct Activation {
  std::string tensor;
  Shape shape;
};

// Builds the graph. Names are unique in it: the variables' names, the input
// and outputs are kept for them, and a node whose name is taken (a layer named
// as another's node, "a/relu") gets "_1", "_2", ... appended.
class GraphBuilder {
 public:
  GraphBuilder(const Model& model, absl::Span<const float> params, absl::Span<const float> state,
               onnx::GraphProto* graph)
      : model_(model), params_(params), state_(state), graph_(graph) {
    for (const VariableInfo& v : model.variables()) {
      variables_[v.name] = &v;
      reserved_.insert(v.name);
    }
    reserved_.insert(
        {kOnnxInputName, kOnnxInputTransposeName, kOnnxProbabilitiesName, kOnnxClassesName});
    // Only where the graph has them, so that an image model's layers keep
    // their names ("dense").
    const Shape& input = model.input_shape();
    if (input.size() == 1 && input[0] > 0) reserved_.insert(kOnnxDenseInputName);
    if (model.head() == Head::kBinary) reserved_.insert(kOnnxLogisticName);
    for (const SparseTableInfo& t : model.sparse_tables()) reserved_.insert(t.name);
    for (const std::string& f : model.sparse_features()) reserved_.insert(f);
  }

  // A node named `name` (or, if that is taken, `name`_k) whose one output
  // tensor has its name. `exact`: one of the reserved names, used once.
  onnx::NodeProto* Node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs, bool exact = false) {
    const std::string unique = exact ? Claim(name) : UniqueName(name);
    onnx::NodeProto* node = graph_->add_node();
    node->set_op_type(op);
    node->set_name(unique);
    for (const std::string& input : inputs) node->add_input(input);
    node->add_output(unique);
    return node;
  }

  // The pstrain variable `name` as an initializer of `dims`, its values
  // reordered by `index` (the variable's element for each of the
  // initializer's, in order) or as they are.
  absl::StatusOr<std::string> Variable(const std::string& name, const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>* index = nullptr) {
    auto it = variables_.find(name);
    if (it == variables_.end() || used_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ONNX export of ", model_.name(), ": its spec has variable ", name,
                       it == variables_.end() ? " but the model has none of that name" : " twice",
                       "; the model was not built from its spec"));
    }
    const VariableInfo& v = *it->second;
    int64_t elements = 1;
    for (int64_t d : dims) elements *= d;
    if (elements != v.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("ONNX export of ", model_.name(), ": variable ", name, " has ", v.size,
                       " values where its spec's layer needs ", elements,
                       "; the model was not built from its spec"));
    }
    const float* values = (v.trainable ? params_.data() : state_.data()) + v.offset;
    std::vector<float> ordered(elements);
    for (int64_t i = 0; i < elements; ++i) ordered[i] = values[index ? (*index)[i] : i];
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(Claim(name));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(ordered.data()), ordered.size() * sizeof(float)));
    return name;
  }

  // Constant initializers that are no pstrain variable, named `name` or
  // `name`_k; the name given.
  std::string FloatScalar(const std::string& name, float value) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(UniqueName(name));
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
    return t->name();
  }
  std::string Int64s(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(UniqueName(name));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
    return t->name();
  }

  // An initializer `name` (a reserved name: a table's) of `dims` holding
  // `raw` (little-endian values of `data_type`).
  void RawInitializer(const std::string& name, int32_t data_type, const std::vector<int64_t>& dims,
                      std::string raw) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(Claim(name));
    t->set_data_type(data_type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::move(raw));
  }

  // Shared constants, made once: "constants/<name>".
  std::string Int64Constant(const std::string& name, const std::vector<int64_t>& values) {
    auto it = constants_.find(name);
    if (it != constants_.end()) return it->second;
    return constants_[name] = Int64s(kOnnxConstantsPrefix + name, values);
  }
  std::string FloatConstant(const std::string& name, float value) {
    auto it = constants_.find(name);
    if (it != constants_.end()) return it->second;
    return constants_[name] = FloatScalar(kOnnxConstantsPrefix + name, value);
  }

  // Marks a reserved `name` used (the graph input's, a variable's).
  std::string Claim(const std::string& name) {
    used_.insert(name);
    return name;
  }

  const std::string& model_name() const { return model_.name(); }

 private:
  std::string UniqueName(const std::string& name) {
    std::string unique = name;
    for (int k = 1; used_.count(unique) || reserved_.count(unique); ++k) {
      unique = absl::StrCat(name, "_", k);
    }
    return Claim(unique);
  }

  const Model& model_;
  absl::Span<const float> params_, state_;
  onnx::GraphProto* graph_;
  std::map<std::string, const VariableInfo*> variables_;
  std::set<std::string> reserved_;  // names kept for one use: variables, input, outputs
  std::set<std::string> used_;
  std::map<std::string, std::string> constants_;  // Int64Constant's and FloatConstant's
};

void SetInt(onnx::NodeProto* node, const char* name, int64_t value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void SetFloat(onnx::NodeProto* node, const char* name, float value) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void SetInts(onnx::NodeProto* node, const char* name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

// A value_info's type: float32 or int64 with these dims, a negative one
// symbolic: "N" for the first, `second_symbol` for another.
void SetTensorType(onnx::ValueInfoProto* info, const std::string& name, int32_t elem_type,
                   const std::vector<int64_t>& dims, const std::string& second_symbol = "") {
  info->set_name(name);
  onnx::TypeProto::Tensor* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  bool first = true;
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param(first || second_symbol.empty() ? "N" : second_symbol);
      first = false;
    } else {
      shape->add_dim()->set_dim_value(d);
    }
  }
}

absl::Status LayerError(const GraphBuilder& b, const LayerSpec& l, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("ONNX export of ", b.model_name(), ": layer ",
                                                 l.name, " (", l.type, ", line ", l.line, ") ",
                                                 what));
}

// An activation function after a conv2d or dense layer's output `x`.
absl::StatusOr<Activation> AddActivation(GraphBuilder& b, const LayerSpec& l, Activation x) {
  if (l.activation == "none") return x;
  static const std::map<std::string, std::string> kOps = {
      {"relu", "Relu"}, {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"leaky_relu", "LeakyRelu"}};
  auto op = kOps.find(l.activation);
  if (op == kOps.end()) return LayerError(b, l, "has an activation the export does not know");
  onnx::NodeProto* node = b.Node(op->second, l.name + "/" + l.activation, {x.tensor});
  if (l.activation == "leaky_relu") SetFloat(node, "alpha", l.alpha);
  return Activation{node->output(0), x.shape};
}

// ONNX pads [top, left, bottom, right] and the output size of a square
// window over [h, w] as pstrain computes them (models/conv2d.h).
struct Window {
  std::vector<int64_t> pads;
  int64_t out_h = 0, out_w = 0;
};
Window WindowOf(const Shape& in, int64_t kernel, int64_t stride, Padding padding) {
  const PaddedDim h = ComputePadding(in[0], kernel, stride, padding);
  const PaddedDim w = ComputePadding(in[1], kernel, stride, padding);
  // The padding after: fixed's whole kernel - 1 - before (written out, though
  // a strided last window may not reach it, so a reader sees fixed padding),
  // else what the last window needs beyond the input (same), if any.
  const auto after = [&](int64_t size, const PaddedDim& d) {
    if (padding == Padding::kFixed) return kernel - 1 - d.pad_before;
    return std::max<int64_t>((d.out - 1) * stride + kernel - size - d.pad_before, 0);
  };
  return {{h.pad_before, w.pad_before, after(in[0], h), after(in[1], w)}, h.out, w.out};
}

// The layer `l` on its inputs `in` (already checked to be one, or two and
// more for add and concat).
absl::StatusOr<Activation> AddLayer(GraphBuilder& b, const LayerSpec& l,
                                    const std::vector<Activation>& in) {
  const Activation& x = in[0];
  const bool spatial = x.shape.size() == 3;
  const std::string& t = l.type;
  if (t == "conv2d") {
    if (!spatial) return LayerError(b, l, "takes a flat input");
    const int64_t k = l.kernel, cin = x.shape[2], f = l.filters;
    // HWIO [k, k, cin, f] -> OIHW [f, cin, k, k].
    std::vector<int64_t> index(k * k * cin * f);
    for (int64_t o = 0; o < f; ++o) {
      for (int64_t i = 0; i < cin; ++i) {
        for (int64_t h = 0; h < k; ++h) {
          for (int64_t w = 0; w < k; ++w) {
            index[((o * cin + i) * k + h) * k + w] = ((h * k + w) * cin + i) * f + o;
          }
        }
      }
    }
    std::vector<std::string> inputs = {x.tensor};
    PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(),
                             b.Variable(l.name + "/kernel", {f, cin, k, k}, &index));
    if (l.use_bias) {
      PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(l.name + "/bias", {f}));
    }
    const Window window = WindowOf(x.shape, k, l.strides, SpecPadding(l));
    onnx::NodeProto* node = b.Node("Conv", l.name, inputs);
    SetInts(node, "kernel_shape", {k, k});
    SetInts(node, "strides", {l.strides, l.strides});
    SetInts(node, "pads", window.pads);
    SetInts(node, "dilations", {1, 1});
    SetInt(node, "group", 1);
    return AddActivation(b, l, {node->output(0), {window.out_h, window.out_w, f}});
  }
  if (t == "dense") {
    if (spatial) return LayerError(b, l, "takes a [h, w, c] input; a flatten goes before it");
    std::vector<std::string> inputs = {x.tensor};
    PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(),
                             b.Variable(l.name + "/kernel", {x.shape[0], l.units}));
    if (l.use_bias) {
      PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(l.name + "/bias", {l.units}));
    }
    onnx::NodeProto* node = b.Node("Gemm", l.name, inputs);
    SetFloat(node, "alpha", 1.0f);
    SetFloat(node, "beta", 1.0f);
    SetInt(node, "transA", 0);
    SetInt(node, "transB", 0);
    return AddActivation(b, l, {node->output(0), {l.units}});
  }
  if (t == "max_pool" || t == "average_pool") {
    if (!spatial) return LayerError(b, l, "takes a flat input");
    const Window window = WindowOf(x.shape, l.pool, l.strides, SpecPadding(l));
    onnx::NodeProto* node = b.Node(t == "max_pool" ? "MaxPool" : "AveragePool", l.name, {x.tensor});
    SetInts(node, "kernel_shape", {l.pool, l.pool});
    SetInts(node, "strides", {l.strides, l.strides});
    SetInts(node, "pads", window.pads);
    SetInt(node, "ceil_mode", 0);
    // pstrain averages the inputs a window covers, not the padding.
    if (t == "average_pool") SetInt(node, "count_include_pad", 0);
    return Activation{node->output(0), {window.out_h, window.out_w, x.shape[2]}};
  }
  if (t == "global_average_pool") {
    if (!spatial) return LayerError(b, l, "takes a flat input");
    onnx::NodeProto* pool = b.Node("GlobalAveragePool", l.name, {x.tensor});
    onnx::NodeProto* flat = b.Node("Flatten", l.name + "/flatten", {pool->output(0)});
    SetInt(flat, "axis", 1);
    return Activation{flat->output(0), {x.shape[2]}};
  }
  if (t == "flatten") {
    std::string from = x.tensor;
    if (spatial) {
      // pstrain flattens NHWC: back to that order first.
      onnx::NodeProto* nhwc = b.Node("Transpose", l.name + "/nhwc", {x.tensor});
      SetInts(nhwc, "perm", {0, 2, 3, 1});
      from = nhwc->output(0);
    }
    onnx::NodeProto* flat = b.Node("Flatten", l.name, {from});
    SetInt(flat, "axis", 1);
    return Activation{flat->output(0), {NumElements(x.shape)}};
  }
  if (t == "dropout") return x;  // the identity at inference
  if (t == "batch_norm") {
    const int64_t c = x.shape.back();
    std::vector<std::string> inputs = {x.tensor};
    for (const char* v : {"gamma", "beta", "moving_mean", "moving_variance"}) {
      PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(l.name + "/" + v, {c}));
    }
    onnx::NodeProto* node = b.Node("BatchNormalization", l.name, inputs);
    SetFloat(node, "epsilon", l.epsilon);
    Activation out{node->output(0), x.shape};
    if (!l.relu) return out;
    onnx::NodeProto* relu = b.Node("Relu", l.name + "/relu", {out.tensor});
    return Activation{relu->output(0), x.shape};
  }
  if (t == "add") {
    // Summed in pstrain's order: ((in0 + in1) + in2) + ...
    std::string sum = x.tensor;
    for (size_t k = 1; k < in.size(); ++k) {
      const std::string name = k + 1 == in.size() ? l.name : absl::StrCat(l.name, "/sum_", k);
      onnx::NodeProto* node = b.Node("Add", name, {sum, in[k].tensor});
      sum = node->output(0);
    }
    return Activation{sum, x.shape};
  }
  if (t == "concat") {
    std::vector<std::string> inputs;
    Shape shape = x.shape;
    shape.back() = 0;
    for (const Activation& a : in) {
      inputs.push_back(a.tensor);
      shape.back() += a.shape.back();
    }
    onnx::NodeProto* node = b.Node("Concat", l.name, inputs);
    SetInt(node, "axis", 1);  // the channels in NCHW, the features when flat
    return Activation{node->output(0), shape};
  }
  if (t == "pad_channels") {
    const int64_t before = (l.filters - x.shape.back()) / 2;
    const int64_t after = l.filters - x.shape.back() - before;
    // [N, C] or [N, C, H, W]: pads on axis 1, begins then ends.
    std::vector<int64_t> pads(2 * (x.shape.size() + 1), 0);
    pads[1] = before;
    pads[x.shape.size() + 2] = after;
    const std::string pads_name = b.Int64s(l.name + "/pads", pads);
    onnx::NodeProto* node = b.Node("Pad", l.name, {x.tensor, pads_name});
    onnx::AttributeProto* mode = node->add_attribute();
    mode->set_name("mode");
    mode->set_type(onnx::AttributeProto::STRING);
    mode->set_s("constant");
    Shape shape = x.shape;
    shape.back() = l.filters;
    return Activation{node->output(0), shape};
  }
  static const std::map<std::string, std::string> kElementwise = {{"identity", "Identity"},
                                                                  {"relu", "Relu"},
                                                                  {"sigmoid", "Sigmoid"},
                                                                  {"tanh", "Tanh"},
                                                                  {"leaky_relu", "LeakyRelu"}};
  auto op = kElementwise.find(t);
  if (op == kElementwise.end()) return LayerError(b, l, "has a type the ONNX export does not know");
  onnx::NodeProto* node = b.Node(op->second, l.name, {x.tensor});
  if (t == "leaky_relu") SetFloat(node, "alpha", l.alpha);
  return Activation{node->output(0), x.shape};
}

// tf.image.per_image_standardization as pstrain does it (data/augment.h), on
// the NHWC images: (x - mean) / max(stddev, 1 / (255 sqrt(n))).
std::string AddStandardization(GraphBuilder& b, const std::string& images, int64_t n) {
  const std::string p = kOnnxPreprocessingPrefix;
  const std::vector<int64_t> axes = {1, 2, 3};
  onnx::NodeProto* mean = b.Node("ReduceMean", p + "mean", {images});
  SetInts(mean, "axes", axes);
  SetInt(mean, "keepdims", 1);
  onnx::NodeProto* centered = b.Node("Sub", p + "centered", {images, mean->output(0)});
  onnx::NodeProto* square = b.Node("Mul", p + "square", {centered->output(0), centered->output(0)});
  onnx::NodeProto* variance = b.Node("ReduceMean", p + "variance", {square->output(0)});
  SetInts(variance, "axes", axes);
  SetInt(variance, "keepdims", 1);
  onnx::NodeProto* stddev = b.Node("Sqrt", p + "stddev", {variance->output(0)});
  const float floor = static_cast<float>(1.0 / (255.0 * std::sqrt(static_cast<double>(n))));
  const std::string floor_name = b.FloatScalar(p + "stddev_floor", floor);
  onnx::NodeProto* adjusted = b.Node("Max", p + "adjusted_stddev", {stddev->output(0), floor_name});
  onnx::NodeProto* out =
      b.Node("Div", p + "standardized", {centered->output(0), adjusted->output(0)});
  return out->output(0);
}

// --- Sparse features and embedding tables ---

// The graph's inputs for the sparse features, the tables' initializers, and
// per feature the nodes every layer that reads it shares (made when first
// needed, named "<feature>/...").
class SparseGraph {
 public:
  SparseGraph(GraphBuilder& b, const Model& model) : b_(b), model_(model) {
    for (size_t i = 0; i < model.sparse_tables().size(); ++i) {
      table_of_[model.sparse_tables()[i].name] = static_cast<int>(i);
    }
    features_.resize(model.sparse_features().size());
  }

  // One int64 input [N, "<feature>_len"] per sparse feature.
  void AddInputs(onnx::GraphProto* graph) {
    for (const std::string& f : model_.sparse_features()) {
      SetTensorType(graph->add_input(), f, onnx::TensorProto::INT64, {-1, -1}, f + "_len");
      b_.Claim(f);
    }
  }

  // Each table as an initializer [buckets, dim] of its trained rows, zeros
  // elsewhere. InvalidArgument for rows that do not fit it.
  absl::Status AddTables(absl::Span<const TrainedTableRows> tables) {
    for (size_t i = 0; i < tables.size(); ++i) {
      const SparseTableInfo& info = model_.sparse_tables()[i];
      const TrainedTableRows& rows = tables[i];
      const std::string where =
          absl::StrCat("ONNX export of ", model_.name(), ": table ", info.name, " (", info.buckets,
                       " buckets of dim ", info.dim, ")");
      if (rows.weights.size() != rows.ids.size() * static_cast<size_t>(info.dim)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", rows.ids.size(), " ids but ",
                                                       rows.weights.size(),
                                                       " weights; each id needs dim weights"));
      }
      std::string raw(static_cast<size_t>(info.buckets * info.dim) * sizeof(float), '\0');
      std::vector<bool> seen(info.buckets);
      const size_t row_bytes = static_cast<size_t>(info.dim) * sizeof(float);
      for (size_t k = 0; k < rows.ids.size(); ++k) {
        const int64_t id = rows.ids[k];
        if (id < 0 || id >= info.buckets || seen[id]) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": trained row id ", id,
              id < 0 || id >= info.buckets ? " is outside [0, buckets)" : " is given twice",
              "; the rows are not this table's"));
        }
        seen[id] = true;
        std::memcpy(raw.data() + id * row_bytes, rows.weights.data() + k * info.dim, row_bytes);
      }
      b_.RawInitializer(info.name, onnx::TensorProto::FLOAT, {info.buckets, info.dim},
                        std::move(raw));
    }
    return absl::OkStatus();
  }

  // The table named `name` and its feature's input; null when the model has
  // no such table (its spec does not describe it).
  const SparseTableInfo* Table(const std::string& name) {
    auto it = table_of_.find(name);
    if (it == table_of_.end()) return nullptr;
    used_.insert(it->second);
    return &model_.sparse_tables()[it->second];
  }

  // Unimplemented for a table no layer looked up: one the export would
  // leave out (a kind of table it does not know).
  absl::Status CheckEveryTableUsed() const {
    for (size_t i = 0; i < model_.sparse_tables().size(); ++i) {
      if (used_.count(static_cast<int>(i))) continue;
      return absl::UnimplementedError(
          absl::StrCat("ONNX export of ", model_.name(), ": table ", model_.sparse_tables()[i].name,
                       " is no embedding's table nor a linear layer's table of one feature; "
                       "this build has no ONNX form for it"));
    }
    return absl::OkStatus();
  }

  // [N, L]: the ids with the -1 padding as 0, to gather from.
  std::string Ids(int feature) {
    FeatureNodes& f = features_[feature];
    if (f.ids.empty()) {
      const std::string& name = model_.sparse_features()[feature];
      f.ids = b_.Node("Max", name + "/ids", {name, b_.Int64Constant("int64_zero", {0})})->output(0);
    }
    return f.ids;
  }

  // [N, L, 1]: 1 for an id, 0 for the padding.
  std::string Mask(int feature) {
    FeatureNodes& f = features_[feature];
    if (f.mask.empty()) {
      f.mask = b_.Node("Unsqueeze", model_.sparse_features()[feature] + "/mask",
                       {Valid(feature), b_.Int64Constant("axis_2", {2})})
                   ->output(0);
    }
    return f.mask;
  }

  // [N, 1]: what the sum of an example's rows is divided by: max(count, 1)
  // for the mean, its square root for sqrtn.
  std::string Divisor(int feature, bool sqrt) {
    FeatureNodes& f = features_[feature];
    const std::string& name = model_.sparse_features()[feature];
    if (f.count.empty()) {
      onnx::NodeProto* count =
          b_.Node("ReduceSum", name + "/count", {Valid(feature), b_.Int64Constant("axis_1", {1})});
      SetInt(count, "keepdims", 1);
      f.count = b_.Node("Max", name + "/count_at_least_1",
                        {count->output(0), b_.FloatConstant("one", 1.0f)})
                    ->output(0);
    }
    if (!sqrt) return f.count;
    if (f.sqrt_count.empty()) {
      f.sqrt_count = b_.Node("Sqrt", name + "/sqrt_count", {f.count})->output(0);
    }
    return f.sqrt_count;
  }

  // [N, dim]: the sum over L of the table's rows at `feature`'s ids, the
  // padding masked out; nodes "<prefix>/rows", "<prefix>/masked" and `sum`.
  std::string SumOfRows(const SparseTableInfo& table, const std::string& prefix,
                        const std::string& sum) {
    onnx::NodeProto* rows = b_.Node("Gather", prefix + "/rows", {table.name, Ids(table.feature)});
    SetInt(rows, "axis", 0);
    onnx::NodeProto* masked =
        b_.Node("Mul", prefix + "/masked", {rows->output(0), Mask(table.feature)});
    onnx::NodeProto* reduced =
        b_.Node("ReduceSum", sum, {masked->output(0), b_.Int64Constant("axis_1", {1})});
    SetInt(reduced, "keepdims", 0);
    return reduced->output(0);
  }

 private:
  struct FeatureNodes {
    std::string ids, valid, mask, count, sqrt_count;
  };

  // [N, L] float32: 1 for an id, 0 for the padding.
  std::string Valid(int feature) {
    FeatureNodes& f = features_[feature];
    if (f.valid.empty()) {
      const std::string& name = model_.sparse_features()[feature];
      onnx::NodeProto* valid =
          b_.Node("GreaterOrEqual", name + "/is_id", {name, b_.Int64Constant("int64_zero", {0})});
      onnx::NodeProto* cast = b_.Node("Cast", name + "/valid", {valid->output(0)});
      SetInt(cast, "to", onnx::TensorProto::FLOAT);
      f.valid = cast->output(0);
    }
    return f.valid;
  }

  GraphBuilder& b_;
  const Model& model_;
  std::map<std::string, int> table_of_;
  std::set<int> used_;  // tables Table() gave
  std::vector<FeatureNodes> features_;
};

// embedding: the combiner over the rows of the example's ids.
absl::StatusOr<Activation> AddEmbedding(GraphBuilder& b, SparseGraph& sparse, const LayerSpec& l) {
  const SparseTableInfo* table = sparse.Table(l.name + "/embeddings");
  if (table == nullptr) return LayerError(b, l, "has no table in the model");
  if (l.combiner == "sum") {
    return Activation{sparse.SumOfRows(*table, l.name, l.name), {table->dim}};
  }
  const std::string sum = sparse.SumOfRows(*table, l.name, l.name + "/sum");
  const std::string divisor = sparse.Divisor(table->feature, l.combiner == "sqrtn");
  return Activation{b.Node("Div", l.name, {sum, divisor})->output(0), {table->dim}};
}

// linear: per feature the sum of its weights at the example's ids, summed,
// plus the bias.
absl::StatusOr<Activation> AddLinear(GraphBuilder& b, SparseGraph& sparse, const LayerSpec& l) {
  std::vector<std::string> terms;
  if (l.use_bias) {
    PSTRAIN_ASSIGN_OR_RETURN(terms.emplace_back(), b.Variable(l.name + "/bias", {1}));
  }
  for (const std::string& feature : l.features) {
    const SparseTableInfo* table = sparse.Table(l.name + "/" + feature);
    if (table == nullptr) return LayerError(b, l, "has no table in the model for " + feature);
    const std::string prefix = l.name + "/" + feature;
    terms.push_back(sparse.SumOfRows(*table, prefix, prefix + "/sum"));
  }
  return Activation{b.Node("Sum", l.name, terms)->output(0), {1}};
}

// dot_interaction: x_0 followed by x_i . x_j for i > j, in DLRM's order,
// from the [k, k] Gram matrix of the stacked inputs.
absl::StatusOr<Activation> AddDotInteraction(GraphBuilder& b, const LayerSpec& l,
                                             const std::vector<Activation>& in) {
  const int64_t k = static_cast<int64_t>(in.size());
  const int64_t d = in[0].shape.size() == 1 ? in[0].shape[0] : 0;
  for (const Activation& a : in) {
    if (a.shape != Shape{d} || d == 0) {
      return LayerError(b, l, "takes inputs that are not flat and of one size");
    }
  }
  std::vector<std::string> tensors;
  for (const Activation& a : in) tensors.push_back(a.tensor);
  onnx::NodeProto* concat = b.Node("Concat", l.name + "/concat", tensors);
  SetInt(concat, "axis", 1);
  onnx::NodeProto* stacked =
      b.Node("Reshape", l.name + "/stacked",
             {concat->output(0), b.Int64s(l.name + "/stacked_shape", {0, k, d})});
  onnx::NodeProto* transposed = b.Node("Transpose", l.name + "/transposed", {stacked->output(0)});
  SetInts(transposed, "perm", {0, 2, 1});
  onnx::NodeProto* dots =
      b.Node("MatMul", l.name + "/dots", {stacked->output(0), transposed->output(0)});
  onnx::NodeProto* flat = b.Node("Reshape", l.name + "/flat_dots",
                                 {dots->output(0), b.Int64s(l.name + "/flat_shape", {0, k * k})});
  std::vector<int64_t> pairs;
  for (int64_t i = 1; i < k; ++i) {
    for (int64_t j = 0; j < i; ++j) pairs.push_back(i * k + j);
  }
  onnx::NodeProto* gather = b.Node("Gather", l.name + "/pairs",
                                   {flat->output(0), b.Int64s(l.name + "/pair_indices", pairs)});
  SetInt(gather, "axis", 1);
  onnx::NodeProto* out = b.Node("Concat", l.name, {in[0].tensor, gather->output(0)});
  SetInt(out, "axis", 1);
  return Activation{out->output(0), {d + k * (k - 1) / 2}};
}

// The variables, tables and features of `a` and `b` agree in name, shape,
// kind and place, and so do their heads.
bool SameVariables(const Model& a, const Model& b) {
  if (a.variables().size() != b.variables().size()) return false;
  for (size_t i = 0; i < a.variables().size(); ++i) {
    const VariableInfo& x = a.variables()[i];
    const VariableInfo& y = b.variables()[i];
    if (x.name != y.name || x.shape != y.shape || x.trainable != y.trainable ||
        x.offset != y.offset) {
      return false;
    }
  }
  if (a.sparse_tables().size() != b.sparse_tables().size() ||
      a.sparse_features() != b.sparse_features() || a.head() != b.head()) {
    return false;
  }
  for (size_t i = 0; i < a.sparse_tables().size(); ++i) {
    const SparseTableInfo& x = a.sparse_tables()[i];
    const SparseTableInfo& y = b.sparse_tables()[i];
    if (x.name != y.name || x.feature != y.feature || x.dim != y.dim || x.buckets != y.buckets) {
      return false;
    }
  }
  return a.num_params() == b.num_params() && a.num_state() == b.num_state();
}

// The model's input activation: the images transposed to NCHW after their
// preprocessing, or the flat dense features ("" when there are none).
Activation AddInput(GraphBuilder& b, const Model& model, onnx::GraphProto* graph) {
  const Shape& shape = model.input_shape();
  if (shape.size() != 3) {
    if (shape[0] == 0) return Activation{"", shape};
    SetTensorType(graph->add_input(), kOnnxDenseInputName, onnx::TensorProto::FLOAT,
                  {-1, shape[0]});
    return Activation{b.Claim(kOnnxDenseInputName), shape};
  }
  SetTensorType(graph->add_input(), kOnnxInputName, onnx::TensorProto::FLOAT,
                {-1, shape[0], shape[1], shape[2]});
  b.Claim(kOnnxInputName);
  std::string images = kOnnxInputName;
  if (model.input_preprocessing().per_image_standardization) {
    images = AddStandardization(b, images, NumElements(shape));
  }
  onnx::NodeProto* transpose =
      b.Node("Transpose", kOnnxInputTransposeName, {images}, /*exact=*/true);
  SetInts(transpose, "perm", {0, 3, 1, 2});
  return Activation{transpose->output(0), shape};
}

// The outputs on the logits: softmax's probabilities and ArgMax classes, or
// for a binary head [1 - sigmoid(z), sigmoid(z)], sigmoid(z) > 0.5 and
// sigmoid(z).
void AddHead(GraphBuilder& b, const Model& model, const Activation& logits,
             onnx::GraphProto* graph) {
  if (model.head() == Head::kSoftmax) {
    onnx::NodeProto* softmax =
        b.Node("Softmax", kOnnxProbabilitiesName, {logits.tensor}, /*exact=*/true);
    SetInt(softmax, "axis", 1);
    onnx::NodeProto* argmax = b.Node("ArgMax", kOnnxClassesName, {logits.tensor}, /*exact=*/true);
    SetInt(argmax, "axis", 1);
    SetInt(argmax, "keepdims", 0);
    SetTensorType(graph->add_output(), kOnnxProbabilitiesName, onnx::TensorProto::FLOAT,
                  {-1, model.num_classes()});
    SetTensorType(graph->add_output(), kOnnxClassesName, onnx::TensorProto::INT64, {-1});
    return;
  }
  const std::string probabilities = kOnnxProbabilitiesName;
  const std::string classes = kOnnxClassesName;
  onnx::NodeProto* logistic = b.Node("Sigmoid", kOnnxLogisticName, {logits.tensor}, /*exact=*/true);
  onnx::NodeProto* negative = b.Node("Sub", probabilities + "/negative",
                                     {b.FloatConstant("one", 1.0f), logistic->output(0)});
  onnx::NodeProto* both = b.Node("Concat", kOnnxProbabilitiesName,
                                 {negative->output(0), logistic->output(0)}, /*exact=*/true);
  SetInt(both, "axis", 1);
  // Class 1 where sigmoid(z) > 0.5, as pstrain's Predictor decides
  // (serving/predictor.cc), so classes agree with the probabilities.
  onnx::NodeProto* positive = b.Node("Greater", classes + "/positive",
                                     {logistic->output(0), b.FloatConstant("half", 0.5f)});
  onnx::NodeProto* cast = b.Node("Cast", classes + "/int64", {positive->output(0)});
  SetInt(cast, "to", onnx::TensorProto::INT64);
  b.Node("Squeeze", kOnnxClassesName, {cast->output(0), b.Int64Constant("axis_1", {1})},
         /*exact=*/true);
  SetTensorType(graph->add_output(), kOnnxProbabilitiesName, onnx::TensorProto::FLOAT, {-1, 2});
  SetTensorType(graph->add_output(), kOnnxClassesName, onnx::TensorProto::INT64, {-1});
  SetTensorType(graph->add_output(), kOnnxLogisticName, onnx::TensorProto::FLOAT, {-1, 1});
}

absl::Status BuildGraph(const Model& model, const ModelSpec& spec, absl::Span<const float> params,
                        absl::Span<const float> state, absl::Span<const TrainedTableRows> tables,
                        onnx::GraphProto* graph) {
  GraphBuilder b(model, params, state, graph);
  graph->set_name(model.name());
  const Activation input = AddInput(b, model, graph);
  SparseGraph sparse(b, model);
  sparse.AddInputs(graph);
  PSTRAIN_RETURN_IF_ERROR(sparse.AddTables(tables));

  std::map<std::string, Activation> outputs = {{"input", input}};
  Activation previous = input;
  for (const LayerSpec& l : spec.layers) {
    // embedding and linear read only their features.
    if (l.type == "embedding" || l.type == "linear") {
      PSTRAIN_ASSIGN_OR_RETURN(
          previous, l.type == "embedding" ? AddEmbedding(b, sparse, l) : AddLinear(b, sparse, l));
      outputs[l.name] = previous;
      continue;
    }
    std::vector<std::string> names = l.inputs;
    names.insert(names.begin(), l.input);
    std::vector<Activation> in;
    for (const std::string& name : names) {
      if (name.empty()) {
        in.push_back(previous);
        continue;
      }
      auto it = outputs.find(name);
      if (it == outputs.end()) return LayerError(b, l, absl::StrCat("takes unknown ", name));
      in.push_back(it->second);
    }
    const bool merge = l.type == "add" || l.type == "concat" || l.type == "dot_interaction";
    if (merge ? in.size() < 2 : in.size() != 1) {
      return LayerError(b, l, absl::StrCat("takes ", in.size(), " inputs"));
    }
    // An empty dense input (input: [0]) has no tensor: a concat leaves it
    // out, as it adds nothing; no other layer may take it.
    if (l.type == "concat") {
      std::erase_if(in, [](const Activation& a) { return a.tensor.empty(); });
      if (in.empty()) return LayerError(b, l, "takes only the empty input");
    }
    for (const Activation& a : in) {
      if (a.tensor.empty()) {
        return LayerError(b, l,
                          "takes the model's empty input (input: [0]), which the ONNX graph "
                          "has no tensor for");
      }
    }
    if (l.type == "dot_interaction") {
      PSTRAIN_ASSIGN_OR_RETURN(previous, AddDotInteraction(b, l, in));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(previous, AddLayer(b, l, in));
    }
    outputs[l.name] = previous;
  }
  PSTRAIN_RETURN_IF_ERROR(sparse.CheckEveryTableUsed());
  if (previous.shape != Shape{model.num_logits()}) {
    return absl::InvalidArgumentError(
        absl::StrCat("ONNX export of ", model.name(), ": its spec ends in ",
                     ShapeToString(previous.shape), ", not its ", model.num_logits(), " logits"));
  }
  AddHead(b, model, previous, graph);
  return absl::OkStatus();
}

// The features a crossed table crosses ("[a, b]"), "" for a plain table.
// SparseTableInfo::cross is read only where it exists, so this builds with
// models/sparse_input.h from before crosses too.
template <typename Table>
std::string CrossedFeatures(const Model& model, const Table& t) {
  if constexpr (requires { t.cross.empty(); }) {
    if (t.cross.empty()) return "";
    std::vector<std::string> names;
    for (int f : t.cross) names.push_back(model.sparse_features()[f]);
    return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
  } else {
    return "";
  }
}

// The graph's inputs, outputs and initializers have the names the contract
// gives them: a sparse feature named as one of the others, or a table as a
// variable, would make two tensors of one name.
absl::Status CheckNames(const Model& model) {
  std::set<std::string> taken = {kOnnxInputName, kOnnxInputTransposeName, kOnnxProbabilitiesName,
                                 kOnnxClassesName};
  if (model.input_shape().size() == 1 && model.input_shape()[0] > 0) {
    taken.insert(kOnnxDenseInputName);
  }
  if (model.head() == Head::kBinary) taken.insert(kOnnxLogisticName);
  for (const VariableInfo& v : model.variables()) taken.insert(v.name);
  std::vector<std::string> names;
  for (const SparseTableInfo& t : model.sparse_tables()) names.push_back(t.name);
  names.insert(names.end(), model.sparse_features().begin(), model.sparse_features().end());
  for (const std::string& name : names) {
    if (!taken.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ONNX export of ", model.name(), ": the sparse feature or table ", name,
          " would have the name of another of the graph's inputs, outputs or initializers; "
          "rename the feature or layer"));
    }
  }
  return absl::OkStatus();
}

absl::Status TooLarge(const Model& model, uint64_t bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("ONNX export of ", model.name(), ": ", bytes,
                   " bytes, past protobuf's 2 GiB limit for "
                   "one ONNX file (external data is not written); export a smaller model",
                   model.has_sparse() ? " or tables of fewer buckets" : ""));
}

}  // namespace

absl::StatusOr<std::string> ModelToOnnx(const Model& model, absl::Span<const float> params,
                                        absl::Span<const float> state,
                                        absl::Span<const TrainedTableRows> tables) {
  if (model.spec_yaml().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX export of ", model.name(),
        ": the model has no model spec (it was built in code); "
        "build it from a spec (models/registry.h BuildModelFromSpecText or BuildModel)"));
  }
  for (const SparseTableInfo& t : model.sparse_tables()) {
    if (t.buckets == 0) {
      return absl::UnimplementedError(absl::StrCat(
          "ONNX export of ", model.name(), ": table ", t.name,
          ": dynamic tables have no ONNX form: their ids are unbounded; give the table "
          "`buckets:` to export it to ONNX"));
    }
    const std::string crossed = CrossedFeatures(model, t);
    if (!crossed.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "ONNX export of ", model.name(), ": table ", t.name, " crosses ", crossed,
          ": crossed tables have no ONNX form in this build (a cross's rows are fingerprints "
          "of value combinations, which no ONNX op computes); export a model without "
          "`crosses:`"));
    }
  }
  // One int64 input per feature holds its values' rows: every table that
  // reads the feature must take the same rows (a string hashed modulo 11 and
  // modulo 17 gives two).
  for (const SparseTableInfo& t : model.sparse_tables()) {
    for (const SparseTableInfo& u : model.sparse_tables()) {
      if (t.feature != u.feature || t.buckets == u.buckets) continue;
      return absl::UnimplementedError(absl::StrCat(
          "ONNX export of ", model.name(), ": feature ", model.sparse_features()[t.feature],
          " is read by tables of ", t.buckets, " (", t.name, ") and ", u.buckets, " (", u.name,
          ") buckets; the graph takes one row id per value, which a string hashed modulo two "
          "bucket counts does not have: give the feature's tables the same buckets"));
    }
  }
  if (tables.size() != model.sparse_tables().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ONNX export of ", model.name(), ": got the rows of ", tables.size(),
                     " tables, but the model has ", model.sparse_tables().size(),
                     " (every sparse_tables() entry's, in that order)"));
  }
  if (static_cast<int64_t>(params.size()) != model.num_params() ||
      static_cast<int64_t>(state.size()) != model.num_state()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX export of ", model.name(), ": got ", params.size(), " parameters and ", state.size(),
        " state values, but the model has ", model.num_params(), " and ", model.num_state()));
  }
  const std::string source = absl::StrCat(model.name(), "'s model spec");
  PSTRAIN_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(model.spec_yaml(), source));
  // The spec's layers one by one (no fused residual blocks), to check that
  // the spec describes `model`: the same variables in the same places.
  SpecBuildOptions unfused;
  unfused.fuse_residual_blocks = false;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> plain, BuildModelFromSpec(spec, source, unfused));
  if (!SameVariables(model, *plain) || plain->input_shape() != model.input_shape() ||
      plain->num_classes() != model.num_classes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ONNX export of ", model.name(),
        ": its model spec does not describe it (other variables, tables, input, head or classes); "
        "export a model built from its spec"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckNames(model));

  // The tables alone may be past the limit: refuse before making them.
  uint64_t floats = params.size() + state.size();
  for (const SparseTableInfo& t : model.sparse_tables()) {
    floats += static_cast<uint64_t>(t.buckets) * static_cast<uint64_t>(t.dim);
  }
  if (floats * sizeof(float) > static_cast<uint64_t>(INT_MAX)) {
    return TooLarge(model, floats * sizeof(float));
  }

  onnx::ModelProto proto;
  proto.set_ir_version(kOnnxIrVersion);
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpsetVersion);
  proto.set_producer_name(kOnnxProducerName);
  proto.set_producer_version(kVersion);
  proto.set_model_version(1);
  proto.set_doc_string(absl::StrCat(
      "pstrain model ", model.name(), ": ",
      model.input_shape().size() == 3 ? "images [N, H, W, C] in [0, 1]"
                                      : "dense features [N, n] and sparse id features [N, L]",
      " -> probabilities, classes", model.head() == Head::kBinary ? ", logistic" : ""));
  PSTRAIN_RETURN_IF_ERROR(BuildGraph(model, spec, params, state, tables, proto.mutable_graph()));
  onnx::StringStringEntryProto* spec_entry = proto.add_metadata_props();
  spec_entry->set_key(kOnnxSpecKey);
  spec_entry->set_value(model.spec_yaml());
  if (model.input_preprocessing().per_image_standardization) {
    onnx::StringStringEntryProto* p = proto.add_metadata_props();
    p->set_key(kOnnxPreprocessingKey);
    p->set_value(kOnnxPerImageStandardization);
  }
  const size_t bytes = proto.ByteSizeLong();
  if (bytes > static_cast<size_t>(INT_MAX)) return TooLarge(model, bytes);
  std::string out;
  if (!proto.SerializeToString(&out)) {
    return absl::InternalError(
        absl::StrCat("ONNX export of ", model.name(), ": protobuf could not serialize the graph"));
  }
  return out;
}

}  // namespace pstrain
