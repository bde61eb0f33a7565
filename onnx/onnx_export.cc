#include "onnx/onnx_export.h"

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "config/model_spec.h"
#include "models/spec_builder.h"
#include "onnx/onnx.pb.h"
#include "onnx/onnx_export_internal.h"

namespace pstrain {
namespace {

using onnx_export_internal::Activation;
using onnx_export_internal::AddAttention;
using onnx_export_internal::AddDinAttention;
using onnx_export_internal::AddDotInteraction;
using onnx_export_internal::AddEmbedding;
using onnx_export_internal::AddLayer;
using onnx_export_internal::AddLinear;
using onnx_export_internal::AddMmoe;
using onnx_export_internal::AddSequencePool;
using onnx_export_internal::AddSlice;
using onnx_export_internal::AddStandardization;
using onnx_export_internal::GraphBuilder;
using onnx_export_internal::LayerError;
using onnx_export_internal::SetInt;
using onnx_export_internal::SetInts;
using onnx_export_internal::SetTensorType;
using onnx_export_internal::SparseGraph;

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
      a.sparse_features() != b.sparse_features() || a.head() != b.head() ||
      a.heads().size() != b.heads().size()) {
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

// A multi-task model's outputs: one per head, named as the head, as
// pstrain-serve answers: a binary head's sigmoid(z) [N], a regression head's
// value [N], a softmax head's probabilities [N, classes].
absl::Status AddHeads(GraphBuilder& b, const Model& model, const ModelSpec& spec,
                      const std::map<std::string, Activation>& outputs, onnx::GraphProto* graph) {
  if (spec.heads.size() != model.heads().size()) {
    return absl::InvalidArgumentError(absl::StrCat("ONNX export of ", model.name(),
                                                   ": its spec has ", spec.heads.size(),
                                                   " heads, the model ", model.heads().size()));
  }
  for (size_t h = 0; h < model.heads().size(); ++h) {
    const ModelHead& head = model.heads()[h];
    const auto it = outputs.find(spec.heads[h].input);
    if (it == outputs.end() || it->second.shape != Shape{head.num_logits()}) {
      return absl::InvalidArgumentError(
          absl::StrCat("ONNX export of ", model.name(), ": head ", head.name, " takes layer ",
                       spec.heads[h].input, ", which gives no logits of its shape"));
    }
    const Activation& logits = it->second;
    if (head.kind == Head::kSoftmax) {
      onnx::NodeProto* softmax = b.Node("Softmax", head.name, {logits.tensor}, /*exact=*/true);
      SetInt(softmax, "axis", 1);
      SetTensorType(graph->add_output(), head.name, onnx::TensorProto::FLOAT,
                    {-1, head.num_classes});
      continue;
    }
    std::string values = logits.tensor;
    if (head.kind == Head::kBinary) {
      values = b.Node("Sigmoid", head.name + "/logistic", {logits.tensor})->output(0);
    }
    b.Node("Squeeze", head.name, {values, b.Int64Constant("axis_1", {1})}, /*exact=*/true);
    SetTensorType(graph->add_output(), head.name, onnx::TensorProto::FLOAT, {-1});
  }
  return absl::OkStatus();
}

// The outputs on the logits: softmax's probabilities and ArgMax classes, or
// for a binary head [1 - sigmoid(z), sigmoid(z)], sigmoid(z) > 0.5 and
// sigmoid(z); a regression head's [N] values, its [N, 1] output squeezed.
void AddHead(GraphBuilder& b, const Model& model, const Activation& logits,
             onnx::GraphProto* graph) {
  if (model.head() == Head::kRegression) {
    b.Node("Squeeze", kOnnxPredictionsName, {logits.tensor, b.Int64Constant("axis_1", {1})},
           /*exact=*/true);
    SetTensorType(graph->add_output(), kOnnxPredictionsName, onnx::TensorProto::FLOAT, {-1});
    return;
  }
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

// `out` with the mask pstrain's model gives the layer's output (Model's
// act_mask_, Layer::MaskFrom): attention's query's when that is a sequence;
// for other layers whose output is a sequence as long as their first
// input's, that input's (a merge's: any input's). Its padded positions are
// zeroed, as the model zeroes them ("<layer>/zero_padding"), but after
// layers that pass their input on unchanged.
Activation WithMask(GraphBuilder& b, const LayerSpec& l, const std::vector<Activation>& in,
                    Activation out) {
  std::shared_ptr<onnx_export_internal::SequenceMask> mask;
  if (l.type == "multi_head_attention") {
    if (in.back().shape.size() == 2) mask = in.back().mask;
  } else if (out.shape.size() >= 2 && in[0].shape.size() >= 2 && out.shape[0] == in[0].shape[0]) {
    for (const Activation& a : in) {
      if (mask == nullptr) mask = a.mask;
    }
  }
  if (mask == nullptr) return out;
  out.mask = mask;
  if (l.type == "dropout" || l.type == "identity") return out;
  out.tensor = b.Node("Mul", l.name + "/zero_padding", {out.tensor, mask->mask})->output(0);
  return out;
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
    std::vector<Activation> in;
    for (const std::string& name : LayerInputNames(l)) {
      if (name.empty()) {
        in.push_back(previous);
        continue;
      }
      auto it = outputs.find(name);
      if (it == outputs.end()) return LayerError(b, l, absl::StrCat("takes unknown ", name));
      in.push_back(it->second);
    }
    const bool merge = l.type == "add" || l.type == "concat" || l.type == "dot_interaction";
    const size_t most = merge                              ? in.size()
                        : l.type == "multi_head_attention" ? 2
                        : l.type == "din_attention"        ? 2
                                                           : 1;
    const size_t least = merge || l.type == "din_attention" ? 2 : 1;
    if (in.size() < least || in.size() > most) {
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
    Activation out;
    if (l.type == "dot_interaction") {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddDotInteraction(b, l, in));
    } else if (l.type == "multi_head_attention") {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddAttention(b, l, in));
    } else if (l.type == "din_attention") {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddDinAttention(b, l, in));
    } else if (l.type == "sequence_pool") {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddSequencePool(b, l, in[0]));
    } else if (l.type == "mmoe") {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddMmoe(b, l, in[0]));
    } else if (l.type == "slice") {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddSlice(b, l, in[0]));
    } else {
      PSTRAIN_ASSIGN_OR_RETURN(out, AddLayer(b, l, in));
    }
    previous = WithMask(b, l, in, std::move(out));
    outputs[l.name] = previous;
  }
  PSTRAIN_RETURN_IF_ERROR(sparse.CheckEveryTableUsed());
  if (model.multi_head()) return AddHeads(b, model, spec, outputs, graph);
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
  if (model.head() == Head::kRegression) taken.insert(kOnnxPredictionsName);
  if (model.multi_head()) {
    for (const ModelHead& h : model.heads()) {
      if (!taken.insert(h.name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("ONNX export of ", model.name(), ": head ", h.name,
                         " would have the name of another of the graph's inputs, outputs or "
                         "initializers; rename the head"));
      }
    }
  }
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
  if (model.spec() == nullptr) {
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
  const auto features_of = [](const SparseTableInfo& t) {
    std::vector<int> features = {t.feature};
    features.insert(features.end(), t.shared_features.begin(), t.shared_features.end());
    return features;
  };
  for (const SparseTableInfo& t : model.sparse_tables()) {
    for (const SparseTableInfo& u : model.sparse_tables()) {
      if (t.buckets == u.buckets) continue;
      for (int f : features_of(t)) {
        const std::vector<int> other = features_of(u);
        if (std::find(other.begin(), other.end(), f) == other.end()) continue;
        return absl::UnimplementedError(absl::StrCat(
            "ONNX export of ", model.name(), ": feature ", model.sparse_features()[f],
            " is read by tables of ", t.buckets, " (", t.name, ") and ", u.buckets, " (", u.name,
            ") buckets; the graph takes one row id per value, which a string hashed modulo two "
            "bucket counts does not have: give the feature's tables the same buckets"));
      }
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
  const ModelSpec& spec = *model.spec();
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
      model.multi_head()                  ? " -> an output per head, named as the head"
      : model.head() == Head::kRegression ? " -> predictions"
                                          : " -> probabilities, classes",
      model.head() == Head::kBinary && !model.multi_head() ? ", logistic" : ""));
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
