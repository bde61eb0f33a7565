// The graph builder of the ONNX export (onnx_export_internal.h): unique
// names, variables and constants as initializers, and nodes' attributes.
#include <utility>

#include "absl/strings/str_cat.h"
#include "onnx/onnx_export_internal.h"

namespace pstrain {
namespace onnx_export_internal {

GraphBuilder::GraphBuilder(const Model& model, absl::Span<const float> params,
                           absl::Span<const float> state, onnx::GraphProto* graph)
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
  if (model.head() == Head::kRegression) reserved_.insert(kOnnxPredictionsName);
  // A multi-task model's outputs are its heads' names.
  if (model.multi_head()) {
    for (const ModelHead& h : model.heads()) reserved_.insert(h.name);
  }
  for (const SparseTableInfo& t : model.sparse_tables()) reserved_.insert(t.name);
  for (const std::string& f : model.sparse_features()) reserved_.insert(f);
}

onnx::NodeProto* GraphBuilder::Node(const std::string& op, const std::string& name,
                                    const std::vector<std::string>& inputs, bool exact) {
  const std::string unique = exact ? Claim(name) : UniqueName(name);
  onnx::NodeProto* node = graph_->add_node();
  node->set_op_type(op);
  node->set_name(unique);
  for (const std::string& input : inputs) node->add_input(input);
  node->add_output(unique);
  return node;
}

absl::StatusOr<std::string> GraphBuilder::Variable(const std::string& name,
                                                   const std::vector<int64_t>& dims,
                                                   const std::vector<int64_t>* index) {
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

std::string GraphBuilder::FloatScalar(const std::string& name, float value) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(UniqueName(name));
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
  return t->name();
}

std::string GraphBuilder::Int64s(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(UniqueName(name));
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  t->set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return t->name();
}

std::string GraphBuilder::Int64Scalar(const std::string& name, int64_t value) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(UniqueName(name));
  t->set_data_type(onnx::TensorProto::INT64);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
  return t->name();
}

void GraphBuilder::RawInitializer(const std::string& name, int32_t data_type,
                                  const std::vector<int64_t>& dims, std::string raw) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(Claim(name));
  t->set_data_type(data_type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::move(raw));
}

std::string GraphBuilder::Int64Constant(const std::string& name,
                                        const std::vector<int64_t>& values) {
  auto it = constants_.find(name);
  if (it != constants_.end()) return it->second;
  return constants_[name] = Int64s(kOnnxConstantsPrefix + name, values);
}

std::string GraphBuilder::FloatConstant(const std::string& name, float value) {
  auto it = constants_.find(name);
  if (it != constants_.end()) return it->second;
  return constants_[name] = FloatScalar(kOnnxConstantsPrefix + name, value);
}

std::string GraphBuilder::UniqueName(const std::string& name) {
  std::string unique = name;
  for (int k = 1; used_.count(unique) || reserved_.count(unique); ++k) {
    unique = absl::StrCat(name, "_", k);
  }
  return Claim(unique);
}

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

void SetTensorType(onnx::ValueInfoProto* info, const std::string& name, int32_t elem_type,
                   const std::vector<int64_t>& dims, const std::string& second_symbol) {
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

}  // namespace onnx_export_internal
}  // namespace pstrain
