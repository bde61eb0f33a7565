#include "chief/model_graph.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "config/model_spec.h"
#include "models/model_summary.h"

namespace pstrain {
namespace {

using tensorboard::AttrValue;
using tensorboard::GraphDef;
using tensorboard::NodeDef;
using tensorboard::TensorShapeProto;

constexpr int kFloat = 1;  // tensorflow.DataType DT_FLOAT
constexpr int kInt64 = 9;  // DT_INT64

TensorShapeProto ShapeOf(const Shape& shape, bool batched) {
  TensorShapeProto out;
  if (batched) out.add_dim()->set_size(-1);
  for (int64_t d : shape) out.add_dim()->set_size(d);
  return out;
}

NodeDef* AddNode(GraphDef* graph, const std::string& name, const std::string& op,
                 const std::string& device) {
  NodeDef* node = graph->add_node();
  node->set_name(name);
  node->set_op(op);
  node->set_device(device);
  return node;
}

void SetString(NodeDef* node, const std::string& key, const std::string& value) {
  (*node->mutable_attr())[key].set_s(value);
}

void SetInt(NodeDef* node, const std::string& key, int64_t value) {
  (*node->mutable_attr())[key].set_i(value);
}

// TensorBoard reads a node's output shapes from _output_shapes, a list.
void SetOutputShape(NodeDef* node, const TensorShapeProto& shape) {
  *(*node->mutable_attr())["_output_shapes"].mutable_list()->add_shape() = shape;
}

std::string PsDevice(int task) { return absl::StrCat("/job:ps/replica:0/task:", task); }

// The ps holding flat trainable offset `offset`.
int PsOfParam(const ShardLayout& layout, int64_t offset) {
  for (size_t i = 0; i < layout.ranges.size(); ++i) {
    if (offset >= layout.ranges[i].first && offset < layout.ranges[i].second) {
      return static_cast<int>(i);
    }
  }
  return 0;
}

// The spec layer of a variable "<layer>/<variable>": the longest layer name
// it begins with (names may hold '/').
const LayerSummary* LayerOfVariable(const std::vector<LayerSummary>& layers,
                                    const std::string& variable) {
  const LayerSummary* best = nullptr;
  for (const LayerSummary& l : layers) {
    if (absl::StartsWith(variable, l.name + "/") &&
        (best == nullptr || l.name.size() > best->name.size())) {
      best = &l;
    }
  }
  return best;
}

std::string LossOp(const ModelHead& head) {
  switch (head.kind) {
    case Head::kBinary:
      return "SigmoidCrossEntropy";
    case Head::kSoftmax:
      return "SparseSoftmaxCrossEntropy";
    case Head::kRegression:
      break;
  }
  return head.regression.loss == RegressionLoss::kMae     ? "AbsoluteDifference"
         : head.regression.loss == RegressionLoss::kHuber ? "HuberLoss"
                                                          : "MeanSquaredError";
}

// "adam" -> "Adam", as TF names its optimizers' ops.
std::string OptimizerOp(const std::string& name) {
  if (name.empty()) return "Optimizer";
  std::string op = name;
  op[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(op[0])));
  return op;
}

}  // namespace

absl::StatusOr<GraphDef> ModelGraph(const Model& model, const ShardLayout& layout,
                                    const ModelGraphOptions& options) {
  if (model.spec() == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", model.name(), " was not built from a spec: no graph to draw"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(ModelSummary summary, SummarizeModelSpec(*model.spec(), model.name()));
  GraphDef graph;
  graph.mutable_versions()->set_producer(27);  // a TF 1.15 graph's
  const std::string worker = "/job:worker";
  // The names the model has; the graph's own nodes (labels, loss, the
  // optimizer's) take the first free name of theirs.
  std::set<std::string> used = {"input"};
  for (const LayerSummary& l : summary.layers) used.insert(l.name);
  for (const VariableInfo& v : model.variables()) used.insert(v.name);
  for (const SparseTableInfo& t : model.sparse_tables()) used.insert(t.name);
  auto unique = [&used](const std::string& name) {
    std::string out = name;
    for (int n = 1; used.contains(out); ++n) out = absl::StrCat(name, "_", n);
    used.insert(out);
    return out;
  };
  std::map<std::string, const LayerSpec*> spec_layers;
  for (const LayerSpec& l : model.spec()->layers) spec_layers[l.name] = &l;

  NodeDef* input = AddNode(&graph, "input", "Placeholder", worker);
  (*input->mutable_attr())["dtype"].set_type(kFloat);
  *(*input->mutable_attr())["shape"].mutable_shape() = ShapeOf(model.input_shape(), true);
  SetOutputShape(input, ShapeOf(model.input_shape(), true));

  // The variables, each where its first value lives.
  std::map<std::string, std::vector<std::string>> inputs_of;  // layer -> variables and tables
  for (const VariableInfo& v : model.variables()) {
    const int task = v.trainable ? PsOfParam(layout, v.offset) : 0;  // state: chunk 0, on ps 0
    NodeDef* node = AddNode(&graph, v.name, "VariableV2", PsDevice(task));
    *(*node->mutable_attr())["shape"].mutable_shape() = ShapeOf(v.shape, false);
    (*node->mutable_attr())["dtype"].set_type(kFloat);
    (*node->mutable_attr())["trainable"].set_b(v.trainable);
    SetOutputShape(node, ShapeOf(v.shape, false));
    if (const LayerSummary* l = LayerOfVariable(summary.layers, v.name); l != nullptr) {
      inputs_of[l->name].push_back(v.name);
    }
  }
  // The tables: rows on every ps, by id.
  std::map<std::string, const SparseTableInfo*> tables;
  for (const SparseTableInfo& t : model.sparse_tables()) {
    NodeDef* node = AddNode(&graph, t.name, "EmbeddingTable", "/job:ps");
    SetInt(node, "dim", t.dim);
    SetInt(node, "buckets", t.buckets);
    SetString(node, "feature", model.sparse_features()[t.feature]);
    SetString(node, "optimizer", options.embedding_optimizer);
    SetString(node, "partitioner", absl::StrCat("rows by id hash over ", options.num_ps, " ps"));
    (*node->mutable_attr())["dtype"].set_type(kFloat);
    SetOutputShape(node, ShapeOf({t.buckets > 0 ? t.buckets : -1, t.dim}, false));
    tables[t.name] = &t;
  }
  // The sparse features, fed like the input.
  std::map<std::string, std::string> feature_node;
  for (const std::string& f : model.sparse_features()) {
    feature_node[f] = unique("sparse_input/" + f);
    NodeDef* node = AddNode(&graph, feature_node[f], "Placeholder", worker);
    (*node->mutable_attr())["dtype"].set_type(kInt64);
  }

  // The layers.
  for (const LayerSummary& l : summary.layers) {
    NodeDef* node = AddNode(&graph, l.name, l.type, worker);
    for (const std::string& in : l.inputs) node->add_input(in);
    for (const std::string& v : inputs_of[l.name]) node->add_input(v);
    std::set<std::string> features;
    for (const TableSummary& t : l.tables) {
      const auto table = tables.find(t.name);
      if (table == tables.end()) continue;
      node->add_input(t.name);
      // A crossed table is addressed by its features' values together; any
      // other by the feature this layer reads it by.
      if (table->second->cross.empty()) {
        features.insert(t.feature);
      } else {
        for (int f : table->second->cross) features.insert(model.sparse_features()[f]);
      }
    }
    for (const std::string& f : features) node->add_input(feature_node[f]);
    SetOutputShape(node, ShapeOf(l.output_shape, true));
    if (l.line > 0) SetInt(node, "_spec_line", l.line);
    if (auto it = spec_layers.find(l.name); it != spec_layers.end()) {
      for (const auto& [key, value] : LayerOptions(*it->second)) SetString(node, key, value);
    }
  }

  // The heads, their losses and the optimizer.
  std::vector<std::string> losses;
  const std::vector<HeadSpec>& heads = model.spec()->heads;
  for (size_t h = 0; h < model.heads().size(); ++h) {
    const ModelHead& head = model.heads()[h];
    const std::string scope = model.multi_head() ? head.name + "/" : "";
    const std::string logits =
        model.multi_head() && h < heads.size() ? heads[h].input : summary.layers.back().name;
    NodeDef* labels = AddNode(&graph, unique(scope + "labels"), "Placeholder", worker);
    (*labels->mutable_attr())["dtype"].set_type(head.kind == Head::kRegression ? kFloat : kInt64);
    NodeDef* loss = AddNode(&graph, unique(scope + "loss"), LossOp(head), worker);
    loss->add_input(logits);
    loss->add_input(labels->name());
    if (model.multi_head()) (*loss->mutable_attr())["weight"].set_f(head.weight);
    losses.push_back(loss->name());
  }
  std::string total = losses[0];
  if (model.multi_head()) {
    NodeDef* sum = AddNode(&graph, unique("loss"), "AddN", worker);
    for (const std::string& l : losses) sum->add_input(l);
    total = sum->name();
  }
  NodeDef* train = AddNode(&graph, unique(OptimizerOp(options.optimizer)),
                           OptimizerOp(options.optimizer), worker);
  train->add_input(total);
  SetString(train, "optimizer", options.optimizer);
  return graph;
}

}  // namespace pstrain
