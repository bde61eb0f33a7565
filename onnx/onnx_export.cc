#include "onnx/onnx_export.h"

#include <bit>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

// A value_info's type: float32 or int64 with these dims, "N" for -1.
void SetTensorType(onnx::ValueInfoProto* info, const std::string& name, int32_t elem_type,
                   const std::vector<int64_t>& dims) {
  info->set_name(name);
  onnx::TypeProto::Tensor* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param("N");
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

// The variables of `a` and `b` agree in name, shape, kind and place.
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
  return a.num_params() == b.num_params() && a.num_state() == b.num_state();
}

absl::Status BuildGraph(const Model& model, const ModelSpec& spec, absl::Span<const float> params,
                        absl::Span<const float> state, onnx::GraphProto* graph) {
  GraphBuilder b(model, params, state, graph);
  graph->set_name(model.name());
  const Shape& hwc = model.input_shape();
  SetTensorType(graph->add_input(), kOnnxInputName, onnx::TensorProto::FLOAT,
                {-1, hwc[0], hwc[1], hwc[2]});
  b.Claim(kOnnxInputName);
  std::string images = kOnnxInputName;
  if (model.input_preprocessing().per_image_standardization) {
    images = AddStandardization(b, images, NumElements(hwc));
  }
  onnx::NodeProto* transpose =
      b.Node("Transpose", kOnnxInputTransposeName, {images}, /*exact=*/true);
  SetInts(transpose, "perm", {0, 3, 1, 2});

  std::map<std::string, Activation> outputs = {{"input", {transpose->output(0), hwc}}};
  Activation previous = outputs["input"];
  for (const LayerSpec& l : spec.layers) {
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
    const bool merge = l.type == "add" || l.type == "concat";
    if (merge ? in.size() < 2 : in.size() != 1) {
      return LayerError(b, l, absl::StrCat("takes ", in.size(), " inputs"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(previous, AddLayer(b, l, in));
    outputs[l.name] = previous;
  }
  if (previous.shape != Shape{model.num_classes()}) {
    return absl::InvalidArgumentError(
        absl::StrCat("ONNX export of ", model.name(), ": its spec ends in ",
                     ShapeToString(previous.shape), ", not its ", model.num_classes(), " classes"));
  }
  onnx::NodeProto* softmax =
      b.Node("Softmax", kOnnxProbabilitiesName, {previous.tensor}, /*exact=*/true);
  SetInt(softmax, "axis", 1);
  onnx::NodeProto* argmax = b.Node("ArgMax", kOnnxClassesName, {previous.tensor}, /*exact=*/true);
  SetInt(argmax, "axis", 1);
  SetInt(argmax, "keepdims", 0);
  SetTensorType(graph->add_output(), kOnnxProbabilitiesName, onnx::TensorProto::FLOAT,
                {-1, model.num_classes()});
  SetTensorType(graph->add_output(), kOnnxClassesName, onnx::TensorProto::INT64, {-1});
  return absl::OkStatus();
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
  if (model.has_sparse()) {
    return absl::UnimplementedError(
        absl::StrCat("ONNX export of ", model.name(),
                     ": the model has embedding tables, which this build does not export to "
                     "ONNX yet (a bucketed table will become a Gather; a dynamic one has no "
                     "ONNX form)"));
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
    return absl::InvalidArgumentError(
        absl::StrCat("ONNX export of ", model.name(),
                     ": its model spec does not describe it (other variables, input or classes); "
                     "export a model built from its spec"));
  }

  onnx::ModelProto proto;
  proto.set_ir_version(kOnnxIrVersion);
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpsetVersion);
  proto.set_producer_name(kOnnxProducerName);
  proto.set_producer_version(kVersion);
  proto.set_model_version(1);
  proto.set_doc_string(absl::StrCat("pstrain model ", model.name(),
                                    ": images [N, H, W, C] in [0, 1] -> probabilities, classes"));
  PSTRAIN_RETURN_IF_ERROR(BuildGraph(model, spec, params, state, proto.mutable_graph()));
  onnx::StringStringEntryProto* spec_entry = proto.add_metadata_props();
  spec_entry->set_key(kOnnxSpecKey);
  spec_entry->set_value(model.spec_yaml());
  if (model.input_preprocessing().per_image_standardization) {
    onnx::StringStringEntryProto* p = proto.add_metadata_props();
    p->set_key(kOnnxPreprocessingKey);
    p->set_value(kOnnxPerImageStandardization);
  }
  const size_t bytes = proto.ByteSizeLong();
  if (bytes > static_cast<size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("ONNX export of ", model.name(), ": ", bytes,
                     " bytes, past protobuf's 2 GiB limit for "
                     "one ONNX file (external data is not written); export a smaller model"));
  }
  std::string out;
  if (!proto.SerializeToString(&out)) {
    return absl::InternalError(
        absl::StrCat("ONNX export of ", model.name(), ": protobuf could not serialize the graph"));
  }
  return out;
}

}  // namespace pstrain
