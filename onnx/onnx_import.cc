#include "onnx/onnx_import.h"

#include <algorithm>
#include <climits>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "onnx/onnx_import_internal.h"
#include "onnx/onnx_import_tensors.h"

namespace pstrain {
namespace onnx_import_internal {
namespace {

constexpr int64_t kMaxIrVersion = 8;  // ONNX 1.12's
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxOpset = 17;  // ONNX 1.12's
constexpr int64_t kMinOpset = 7;
constexpr int kMaxNodes = 100000;
// Every dimension of the input, as the spec's sizes.
constexpr int64_t kMaxInputDim = 1 << 20;

constexpr char kPreprocessingKey[] = "pstrain.preprocessing";
constexpr char kSpecKey[] = "pstrain.model_spec";  // onnx/onnx_export.h kOnnxSpecKey
constexpr char kPreprocessingPrefix[] = "preprocessing/";
constexpr char kInputTranspose[] = "input/transpose";

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

bool IsPerm(const onnx::NodeProto& n, const std::vector<int64_t>& perm) {
  if (n.op_type() != "Transpose") return false;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "perm") {
      return std::vector<int64_t>(a.ints().begin(), a.ints().end()) == perm;
    }
  }
  return false;
}

// `message` without the line numbers ParseModelSpec gives (" (line 7)",
// ", line 7", " (lines 3 and 7)", " at line 7, column 2").
std::string StripSpecLines(absl::string_view message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    bool stripped = false;
    for (absl::string_view lead : {" (line ", " (lines ", ", line ", " at line "}) {
      if (!absl::StartsWith(message.substr(i), lead)) continue;
      size_t j = i + lead.size();
      // Digits, " and " / ", column " and digits, then ")" when it opened with "(".
      while (j < message.size() && (absl::ascii_isdigit(static_cast<unsigned char>(message[j])) ||
                                    absl::StartsWith(message.substr(j), " and ") ||
                                    absl::StartsWith(message.substr(j), ", column "))) {
        j += absl::ascii_isdigit(static_cast<unsigned char>(message[j])) ? 1
             : message[j] == ' '                                         ? 5
                                                                         : 9;
      }
      if (j == i + lead.size()) continue;
      if (lead[1] == '(') {
        if (j >= message.size() || message[j] != ')') continue;
        ++j;
      }
      i = j;
      stripped = true;
      break;
    }
    if (!stripped) out.push_back(message[i++]);
  }
  return out;
}

// Whether `message` has `layer` as a word of its own.
bool NamesLayer(absl::string_view message, absl::string_view layer) {
  for (size_t at = message.find(layer); at != absl::string_view::npos;
       at = message.find(layer, at + 1)) {
    const size_t end = at + layer.size();
    const bool starts = at > 0 && message[at - 1] == ' ';
    const bool ends = end == message.size() || absl::StrContains(" ;,:)", message[end]);
    if (starts && ends) return true;
  }
  return false;
}

Act InputAct(std::vector<int64_t> chw) {
  Act act;
  act.layer = "input";
  act.dims = std::move(chw);
  return act;
}

// The graph's int64 inputs (id features: an export of a model with
// embedding tables, onnx/onnx_export.h), joined by ", ".
std::string IdFeatureInputs(const onnx::GraphProto& g) {
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : g.initializer()) initializers.insert(t.name());
  std::vector<std::string> ids;
  for (const onnx::ValueInfoProto& v : g.input()) {
    if (!initializers.count(v.name()) &&
        v.type().tensor_type().elem_type() == onnx::TensorProto_DataType_INT64) {
      ids.push_back(v.name());
    }
  }
  return absl::StrJoin(ids, ", ");
}

}  // namespace

absl::StatusOr<ImportedOnnx> Importer::Run(std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", bytes.size(), " bytes, over protobuf's 2 GB limit"));
  }
  if (!model_.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat(source_,
                     ": not an ONNX model (the bytes do not parse as onnx.ModelProto: truncated or "
                     "damaged, or another format)"));
  }
  PSTRAIN_RETURN_IF_ERROR(CheckVersions());
  if (const std::string ids = IdFeatureInputs(model_.graph()); !ids.empty()) {
    return Error(absl::StrCat(
        "the graph takes int64 id features (", ids,
        "): a model with embedding tables, which the ONNX import does not read (it reads image "
        "classifiers); build the model from its spec (a pstrain export holds it in the "
        "metadata ",
        kSpecKey, ")"));
  }
  PSTRAIN_RETURN_IF_ERROR(IndexGraph());
  PSTRAIN_RETURN_IF_ERROR(ChooseOutput());
  PSTRAIN_RETURN_IF_ERROR(MarkLive());
  PSTRAIN_RETURN_IF_ERROR(SetUpInput());
  for (int index : order_) {
    if (!live_[index] || done_[index]) continue;
    PSTRAIN_RETURN_IF_ERROR(Convert(index));
  }
  PSTRAIN_RETURN_IF_ERROR(Finish());
  return std::move(out_);
}

absl::Status Importer::CheckVersions() {
  if (!model_.has_graph() || model_.ir_version() == 0) {
    return absl::DataLossError(absl::StrCat(source_, ": not an ONNX model (no ",
                                            model_.has_graph() ? "ir_version" : "graph",
                                            "): truncated or damaged, or another format"));
  }
  if (model_.ir_version() > kMaxIrVersion) {
    return Error(absl::StrCat("IR version ", model_.ir_version(), " is newer than this reader's (",
                              kMaxIrVersion,
                              ", ONNX 1.12); export with an older ONNX (torch.onnx.export with "
                              "opset_version=13 writes IR 7)"));
  }
  if (model_.ir_version() < kMinIrVersion) {
    return Error(absl::StrCat("IR version ", model_.ir_version(), " is too old (at least ",
                              kMinIrVersion, "); convert it with onnx.version_converter"));
  }
  bool found = false;
  for (const onnx::OperatorSetIdProto& o : model_.opset_import()) {
    if (!IsDefaultDomain(o.domain())) continue;
    found = true;
    opset_ = o.version();
  }
  if (!found) {
    return Error(
        "the model imports no opset of the default ONNX domain; it is not a model "
        "pstrain can read");
  }
  if (opset_ > kMaxOpset) {
    return Error(absl::StrCat("opset ", opset_, " is newer than this reader's (", kMaxOpset,
                              ", ONNX 1.12); export with opset_version between ", kMinOpset,
                              " and ", kMaxOpset, " (13 is a good choice)"));
  }
  if (opset_ < kMinOpset) {
    return Error(absl::StrCat("opset ", opset_, " is too old (at least ", kMinOpset,
                              "); export with opset_version=13"));
  }
  return absl::OkStatus();
}

absl::Status Importer::IndexGraph() {
  const onnx::GraphProto& g = model_.graph();
  if (g.node_size() > kMaxNodes) {
    return Error(
        absl::StrCat("the graph has ", g.node_size(), " nodes, over the limit of ", kMaxNodes));
  }
  for (const onnx::TensorProto& t : g.initializer()) {
    if (t.name().empty()) return Error("an initializer has no name");
    if (!initializers_.emplace(t.name(), &t).second) {
      return Error(absl::StrCat("two initializers are named ", t.name()));
    }
    values_[t.name()] = Value::OfTensor(&t);
  }
  if (g.sparse_initializer_size() > 0) {
    return Error("the graph has sparse initializers, which pstrain does not read");
  }
  std::set<std::string> inputs;
  for (const onnx::ValueInfoProto& v : g.input()) inputs.insert(v.name());
  const int n = g.node_size();
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : g.node(i).output()) {
      if (out.empty()) continue;
      if (initializers_.count(out) || inputs.count(out)) {
        return Error(absl::StrCat(NodeWhere(g.node(i)), " gives ", out,
                                  ", which is already a graph input or initializer"));
      }
      if (!producer_.emplace(out, i).second) {
        return Error(absl::StrCat(NodeWhere(g.node(i)), " gives ", out, ", which ",
                                  NodeWhere(g.node(producer_[out])), " gives too"));
      }
    }
  }
  // Kahn's algorithm: a node is ready once every node it takes from is placed.
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = 0; i < n; ++i) {
    for (const std::string& in : g.node(i).input()) {
      if (in.empty()) continue;
      auto p = producer_.find(in);
      if (p != producer_.end()) {
        ++waiting[i];
        users[p->second].push_back(i);
      } else if (!initializers_.count(in) && !inputs.count(in)) {
        return Error(absl::StrCat(NodeWhere(g.node(i)), " takes ", in,
                                  ", which no node, initializer or graph input gives"));
      }
    }
  }
  std::queue<int> ready;
  for (int i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  while (!ready.empty()) {
    const int i = ready.front();
    ready.pop();
    order_.push_back(i);
    for (int u : users[i]) {
      if (--waiting[u] == 0) ready.push(u);
    }
  }
  if (static_cast<int>(order_.size()) != n) {
    for (int i = 0; i < n; ++i) {
      if (waiting[i] > 0) {
        return Error(absl::StrCat(
            "the graph has a cycle: ", NodeWhere(g.node(i)),
            " takes (through other nodes, or directly) an output of its own; an ONNX graph's "
            "nodes take only earlier nodes' outputs"));
      }
    }
  }
  live_.assign(n, false);
  done_.assign(n, false);
  return absl::OkStatus();
}

absl::Status Importer::ChooseOutput() {
  std::vector<std::string> candidates;
  for (const onnx::ValueInfoProto& v : model_.graph().output()) {
    const int type = v.type().tensor_type().elem_type();
    if (type != onnx::TensorProto_DataType_UNDEFINED && type != onnx::TensorProto_DataType_FLOAT) {
      continue;  // e.g. the int64 classes of an ArgMax
    }
    candidates.push_back(v.name());
  }
  if (candidates.empty()) {
    return Error(
        "the graph has no float output; pstrain takes a classifier whose output is "
        "[N, classes] (logits or probabilities)");
  }
  if (candidates.size() > 1) {
    return Error(absl::StrCat("the graph has several float outputs (",
                              absl::StrJoin(candidates, ", "),
                              "); pstrain takes a classifier with one, [N, classes]"));
  }
  output_name_ = candidates[0];
  if (!producer_.count(output_name_)) {
    return Error(absl::StrCat("the output ", output_name_, " is not computed by any node"));
  }
  return absl::OkStatus();
}

absl::Status Importer::MarkLive() {
  const onnx::GraphProto& g = model_.graph();
  std::vector<int> stack = {producer_[output_name_]};
  live_[stack[0]] = true;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (const std::string& in : g.node(i).input()) {
      auto p = producer_.find(in);
      if (p == producer_.end() || live_[p->second]) continue;
      live_[p->second] = true;
      stack.push_back(p->second);
    }
  }
  for (int i = 0; i < g.node_size(); ++i) {
    if (!live_[i]) continue;
    const onnx::NodeProto& n = g.node(i);
    if (!IsDefaultDomain(n.domain())) {
      return NodeError(n, absl::StrCat("is in domain ", n.domain(),
                                       "; pstrain reads only the default ONNX domain's ops (",
                                       absl::StrJoin(SupportedOnnxOps(), ", "), ")"));
    }
    for (const std::string& in : n.input()) {
      if (!in.empty()) consumers_[in].push_back(i);
    }
  }
  return absl::OkStatus();
}

absl::Status Importer::SetUpInput() {
  const onnx::GraphProto& g = model_.graph();
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const onnx::ValueInfoProto& v : g.input()) {
    if (!initializers_.count(v.name())) inputs.push_back(&v);
  }
  if (inputs.empty()) return Error("the graph has no input (every input is an initializer)");
  if (inputs.size() > 1) {
    std::vector<std::string> names;
    for (const auto* v : inputs) names.push_back(v->name());
    return Error(absl::StrCat("the graph has ", inputs.size(), " inputs (",
                              absl::StrJoin(names, ", "),
                              "); pstrain takes a model of one input, the images"));
  }
  const onnx::ValueInfoProto& input = *inputs[0];
  input_name_ = input.name();
  const onnx::TypeProto_Tensor& type = input.type().tensor_type();
  if (type.elem_type() != onnx::TensorProto_DataType_FLOAT) {
    return Error(absl::StrCat("the input ", input_name_, " is ", DataTypeName(type.elem_type()),
                              "; pstrain feeds float32 images"));
  }
  std::vector<std::string> shown;
  std::vector<int64_t> dims;
  for (const onnx::TensorShapeProto_Dimension& d : type.shape().dim()) {
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    shown.push_back(d.has_dim_value() ? absl::StrCat(d.dim_value())
                                      : (d.has_dim_param() ? d.dim_param() : "?"));
  }
  const std::string shape_text = absl::StrCat("[", absl::StrJoin(shown, ", "), "]");
  if (dims.size() != 4) {
    return Error(absl::StrCat("the input ", input_name_, " has shape ", shape_text,
                              "; pstrain takes images [N, C, H, W] (or its own exports' "
                              "[N, H, W, C])"));
  }
  for (int i = 1; i < 4; ++i) {
    if (dims[i] < 1 || dims[i] > kMaxInputDim) {
      return Error(absl::StrCat("the input ", input_name_, " has shape ", shape_text,
                                ": every size but the batch must be a fixed number in [1, ",
                                kMaxInputDim,
                                "] (export with fixed image sizes; only the batch dynamic)"));
    }
  }

  // pstrain's own exports: NHWC images, maybe standardized, then Transpose
  // to NCHW named input/transpose.
  std::string preprocessing;
  for (const onnx::StringStringEntryProto& e : model_.metadata_props()) {
    if (e.key() == kPreprocessingKey) preprocessing = e.value();
  }
  if (!preprocessing.empty() && preprocessing != "per_image_standardization") {
    return Error(absl::StrCat("metadata ", kPreprocessingKey, " = ", preprocessing,
                              ": pstrain knows only per_image_standardization"));
  }
  int transpose = -1;
  for (int i : order_) {
    if (live_[i] && g.node(i).name() == kInputTranspose) transpose = i;
  }
  if (transpose < 0 && preprocessing.empty()) {
    const auto& users = consumers_[input_name_];
    if (users.size() == 1 && IsPerm(g.node(users[0]), {0, 3, 1, 2})) transpose = users[0];
  }
  if (transpose < 0) {
    if (!preprocessing.empty()) {
      return Error(absl::StrCat("metadata ", kPreprocessingKey,
                                " says the images are standardized in the graph, but no node is "
                                "named ",
                                kInputTranspose));
    }
    values_[input_name_] = Value::OfAct(InputAct({dims[1], dims[2], dims[3]}));
    out_.spec.input = {dims[2], dims[3], dims[1]};
    return absl::OkStatus();
  }
  const onnx::NodeProto& t = g.node(transpose);
  if (!IsPerm(t, {0, 3, 1, 2}) || t.input_size() != 1 || t.output_size() != 1) {
    return NodeError(t,
                     "is not the Transpose perm [0, 3, 1, 2] of the images that pstrain's "
                     "exports begin with");
  }
  // The nodes the transpose depends on: exactly the preprocessing ones.
  std::set<int> before;
  std::vector<int> stack = {transpose};
  bool reaches_input = t.input(0) == input_name_;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (const std::string& in : g.node(i).input()) {
      if (in == input_name_) reaches_input = true;
      auto p = producer_.find(in);
      if (p != producer_.end() && before.insert(p->second).second) stack.push_back(p->second);
    }
  }
  if (!reaches_input) return NodeError(t, "does not take the images");
  for (int i : before) {
    const onnx::NodeProto& n = g.node(i);
    if (!absl::StartsWith(n.name(), kPreprocessingPrefix) || preprocessing.empty()) {
      return NodeError(n, absl::StrCat("comes between the input and ", NodeWhere(t),
                                       preprocessing.empty()
                                           ? "; without the model's metadata pstrain.preprocessing "
                                             "pstrain takes nothing there"
                                           : absl::StrCat("; pstrain takes only nodes named ",
                                                          kPreprocessingPrefix, "... there")));
    }
    for (const std::string& out : n.output()) {
      for (int user : consumers_[out]) {
        if (user != transpose && !before.count(user)) {
          return NodeError(g.node(user),
                           absl::StrCat("takes ", out, " from the preprocessing nodes; only ",
                                        kInputTranspose, " may"));
        }
      }
    }
    done_[i] = true;
  }
  for (int user : consumers_[input_name_]) {
    if (user != transpose && !before.count(user)) {
      return NodeError(g.node(user), absl::StrCat("takes the images before ", NodeWhere(t),
                                                  "; in a [N, H, W, C] model only the "
                                                  "preprocessing and the transpose may"));
    }
  }
  for (int i = 0; i < g.node_size(); ++i) {
    if (live_[i] && !before.count(i) && absl::StartsWith(g.node(i).name(), kPreprocessingPrefix)) {
      return NodeError(g.node(i),
                       absl::StrCat("is named ", kPreprocessingPrefix,
                                    "... but is not between the input and ", kInputTranspose));
    }
  }
  if (!preprocessing.empty() && before.empty()) {
    return Error(absl::StrCat("metadata ", kPreprocessingKey,
                              " says the images are standardized in the graph, but nothing "
                              "comes before ",
                              kInputTranspose));
  }
  out_.spec.per_image_standardization = !preprocessing.empty();
  out_.spec.input = {dims[1], dims[2], dims[3]};
  done_[transpose] = true;
  values_[t.output(0)] = Value::OfAct(InputAct({dims[3], dims[1], dims[2]}));
  return absl::OkStatus();
}

absl::Status Importer::Finish() {
  auto it = values_.find(output_name_);
  if (it == values_.end() || it->second.kind != Value::kAct) {
    return Error(
        absl::StrCat("the output ", output_name_, " is not an activation pstrain computes"));
  }
  const Act& act = it->second.act;
  if (out_.spec.layers.empty() || act.layer != out_.spec.layers.back().name) {
    return Error(absl::StrCat("the output ", output_name_,
                              " is not the last layer's; pstrain takes a classifier whose "
                              "output comes from its last layer"));
  }
  if (!act.flat || act.dims.size() != 1 || !act.chw.empty()) {
    return Error(absl::StrCat("the output ", output_name_, " is [N, ",
                              absl::StrJoin(act.dims, ", "),
                              "]; pstrain takes a classifier whose output is [N, classes]"));
  }
  if (act.dims[0] < 2 || act.dims[0] > (1 << 20)) {
    return Error(absl::StrCat("the output ", output_name_, " has ", act.dims[0],
                              " classes; pstrain takes 2 to ", 1 << 20));
  }
  ModelSpec& spec = out_.spec;
  spec.classes = static_cast<int>(act.dims[0]);
  // torch.onnx.export's graph names say nothing about the model.
  const std::string& graph_name = model_.graph().name();
  if (graph_name != "torch_jit" && graph_name != "main_graph") {
    spec.name = SanitizeName(graph_name);
  }
  // The spec must read back as itself: what a job or checkpoint stores.
  const std::string yaml = ModelSpecToYaml(spec);
  absl::StatusOr<ModelSpec> again = ParseModelSpec(yaml, "spec");
  if (!again.ok()) {
    // The message's lines are the generated YAML's, not the file's: drop
    // them and name the nodes that made the layers it names instead.
    std::string message = StripSpecLines(absl::StripPrefix(again.status().message(), "spec: "));
    std::vector<std::string> from;
    for (const auto& [layer, node] : out_.origins) {
      if (NamesLayer(message, layer)) {
        from.push_back(absl::StrCat("layer ", layer, " comes from ", node));
      }
    }
    return Error(
        absl::StrCat("the model spec made from the graph is refused: ", message,
                     from.empty() ? "" : absl::StrCat(" (", absl::StrJoin(from, "; "), ")")));
  }
  return absl::OkStatus();
}

}  // namespace onnx_import_internal

const std::vector<std::string>& SupportedOnnxOps() {
  static const std::vector<std::string>* ops = new std::vector<std::string>{"Conv",
                                                                            "Gemm",
                                                                            "MatMul",
                                                                            "Add",
                                                                            "Relu",
                                                                            "LeakyRelu",
                                                                            "Sigmoid",
                                                                            "Tanh",
                                                                            "MaxPool",
                                                                            "AveragePool",
                                                                            "GlobalAveragePool",
                                                                            "BatchNormalization",
                                                                            "Dropout",
                                                                            "Flatten",
                                                                            "Reshape",
                                                                            "Concat",
                                                                            "Identity",
                                                                            "Pad",
                                                                            "Softmax",
                                                                            "LogSoftmax",
                                                                            "Transpose",
                                                                            "Constant",
                                                                            "Shape",
                                                                            "Gather",
                                                                            "Unsqueeze"};
  return *ops;
}

absl::StatusOr<ImportedOnnx> ImportOnnx(std::string_view bytes, std::string_view source) {
  onnx_import_internal::Importer importer(source);
  return importer.Run(bytes);
}

}  // namespace pstrain
