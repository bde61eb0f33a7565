// The model's graph for TensorBoard's GRAPHS tab (issue 54): a node per
// layer and per variable, with the devices of the sharding and the shapes,
// for an image CNN, a ResNet spec, Wide & Deep and DIN; written into an
// event file and read back through the protos with TensorFlow's field
// numbers.
#include "chief/model_graph.h"

#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/record_reader.h"
#include "gtest/gtest.h"
#include "io/event_inspect.h"
#include "io/event_writer.h"
#include "models/model_options.h"
#include "models/model_summary.h"
#include "models/registry.h"
#include "proto/event.pb.h"

namespace pstrain {
namespace {

using tensorboard::GraphDef;
using tensorboard::NodeDef;

std::unique_ptr<Model> LoadGraphModel(const std::string& what) {
  absl::StatusOr<std::unique_ptr<Model>> model =
      absl::EndsWith(what, ".yaml")
          ? BuildModelFromSpecText(
                Env::Default()->ReadFile(std::string(PSTRAIN_SOURCE_DIR) + "/" + what).value_or(""),
                what)
          : BuildModel(what, ModelOptions());
  EXPECT_TRUE(model.ok()) << what << ": " << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<int64_t> GraphDims(const tensorboard::TensorShapeProto& shape) {
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) dims.push_back(d.size());
  return dims;
}

// Checks `graph` against `model` split over `num_ps`: every spec layer a
// node of its type on the workers with its output shape and its variables
// among its inputs; every variable a node on the ps of its first value; every
// table a node on /job:ps; every input a node of the graph.
void ExpectGraphOf(const Model& model, const GraphDef& graph, int num_ps, const std::string& what) {
  std::map<std::string, const NodeDef*> nodes;
  for (const NodeDef& n : graph.node()) {
    EXPECT_TRUE(nodes.emplace(n.name(), &n).second) << what << ": node " << n.name() << " twice";
  }
  for (const NodeDef& n : graph.node()) {
    for (const std::string& in : n.input()) {
      EXPECT_TRUE(nodes.contains(in)) << what << ": " << n.name() << " takes " << in;
    }
  }
  absl::StatusOr<ModelSummary> summary = SummarizeModelSpec(*model.spec(), what);
  ASSERT_TRUE(summary.ok()) << summary.status();
  for (const LayerSummary& l : summary->layers) {
    ASSERT_TRUE(nodes.contains(l.name)) << what << ": no node for layer " << l.name;
    const NodeDef& n = *nodes[l.name];
    EXPECT_EQ(n.op(), l.type) << l.name;
    EXPECT_EQ(n.device(), "/job:worker") << l.name;
    std::vector<int64_t> want = {-1};
    want.insert(want.end(), l.output_shape.begin(), l.output_shape.end());
    ASSERT_TRUE(n.attr().contains("_output_shapes")) << l.name;
    EXPECT_EQ(GraphDims(n.attr().at("_output_shapes").list().shape(0)), want) << l.name;
    for (const std::string& in : l.inputs) {
      EXPECT_NE(std::find(n.input().begin(), n.input().end(), in), n.input().end())
          << what << ": layer " << l.name << " does not take " << in;
    }
  }
  const ShardLayout layout = ComputeShardLayout(model, num_ps);
  std::set<int> tasks;
  for (const VariableInfo& v : model.variables()) {
    ASSERT_TRUE(nodes.contains(v.name)) << what << ": no node for variable " << v.name;
    const NodeDef& n = *nodes[v.name];
    EXPECT_EQ(n.op(), "VariableV2");
    int task = 0;
    for (size_t i = 0; i < layout.ranges.size() && v.trainable; ++i) {
      if (v.offset >= layout.ranges[i].first && v.offset < layout.ranges[i].second) {
        task = static_cast<int>(i);
      }
    }
    tasks.insert(task);
    EXPECT_EQ(n.device(), absl::StrCat("/job:ps/replica:0/task:", task)) << v.name;
    EXPECT_EQ(GraphDims(n.attr().at("shape").shape()),
              std::vector<int64_t>(v.shape.begin(), v.shape.end()))
        << v.name;
    EXPECT_EQ(n.attr().at("dtype").type(), 1) << v.name;
    // It feeds its layer.
    int fed = 0;
    for (const NodeDef& m : graph.node()) {
      if (m.device() != "/job:worker") continue;
      fed += std::count(m.input().begin(), m.input().end(), v.name);
    }
    EXPECT_EQ(fed, 1) << what << ": variable " << v.name << " feeds " << fed << " layers";
  }
  // The variables are spread over the ps (a variable split over several
  // is drawn on the one of its first value, so not every ps need show).
  if (model.num_params() > 1000 && num_ps > 1) {
    EXPECT_GE(tasks.size(), 2u) << what;
  }
  for (const SparseTableInfo& t : model.sparse_tables()) {
    ASSERT_TRUE(nodes.contains(t.name)) << what << ": no node for table " << t.name;
    const NodeDef& n = *nodes[t.name];
    EXPECT_EQ(n.device(), "/job:ps");
    EXPECT_EQ(n.attr().at("dim").i(), t.dim);
    EXPECT_EQ(n.attr().at("buckets").i(), t.buckets);
    EXPECT_EQ(n.attr().at("optimizer").s(), "adagrad");
  }
  // The loss and the optimizer.
  ASSERT_TRUE(nodes.contains("loss")) << what;
  ASSERT_TRUE(nodes.contains("Adam")) << what;
  EXPECT_EQ(nodes["Adam"]->input(0), "loss");
}

class ModelGraphTest : public testing::TestWithParam<std::string> {};

TEST_P(ModelGraphTest, HasANodePerLayerAndVariableWithTheirDevicesAndShapes) {
  std::unique_ptr<Model> model = LoadGraphModel(GetParam());
  ASSERT_NE(model, nullptr);
  for (int num_ps : {1, 2, 3}) {
    ModelGraphOptions options;
    options.num_ps = num_ps;
    absl::StatusOr<GraphDef> graph =
        ModelGraph(*model, ComputeShardLayout(*model, num_ps), options);
    ASSERT_TRUE(graph.ok()) << graph.status();
    ExpectGraphOf(*model, *graph, num_ps, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGraphTest,
                         testing::Values("mnist_cnn", "examples/models/resnet20.yaml",
                                         "examples/models/wide_and_deep.yaml",
                                         "examples/models/din.yaml",
                                         "examples/models/shop_mmoe.yaml"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(info.param.rfind('/') + 1);
                           return name.substr(0, name.find('.'));
                         });

TEST(ModelGraphTest, NamesFoldIntoScopesAndTheHeadsHaveTheirLosses) {
  std::unique_ptr<Model> model = LoadGraphModel("examples/models/shop_mmoe.yaml");
  ASSERT_NE(model, nullptr);
  absl::StatusOr<GraphDef> graph = ModelGraph(*model, ComputeShardLayout(*model, 2), {});
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::map<std::string, const NodeDef*> nodes;
  for (const NodeDef& n : graph->node()) nodes[n.name()] = &n;
  // Each head's loss on its layer, weighted into the model's loss.
  ASSERT_TRUE(nodes.contains("click/loss") && nodes.contains("convert/loss"));
  EXPECT_EQ(nodes["click/loss"]->op(), "SigmoidCrossEntropy");
  EXPECT_EQ(nodes["click/loss"]->input(0), "click_logit");
  EXPECT_EQ(nodes["loss"]->op(), "AddN");
  // A layer's options are attrs: mmoe's experts.
  EXPECT_EQ(nodes["mmoe"]->attr().at("experts").s(), "4");
  // A variable's name scope is its layer's: mmoe/expert0/kernel0 folds into mmoe.
  EXPECT_TRUE(nodes.contains("mmoe/expert0/kernel0"));
  // A layer named as one of the graph's own nodes keeps its name; theirs move.
  std::unique_ptr<Model> named = *BuildModelFromSpecText(
      "input: [4]\nhead: binary\nlayers:\n  - dense: {units: 3, name: loss}\n"
      "  - dense: {units: 1, name: Adam}\n",
      "named.yaml");
  absl::StatusOr<GraphDef> g = ModelGraph(*named, ComputeShardLayout(*named, 1), {});
  ASSERT_TRUE(g.ok()) << g.status();
  std::set<std::string> names;
  for (const NodeDef& n : g->node()) EXPECT_TRUE(names.insert(n.name()).second) << n.name();
  EXPECT_TRUE(names.contains("loss_1") && names.contains("Adam_1"));
}

TEST(ModelGraphTest, AnEventFileCarriesItAsTensorFlowsGraphDef) {
  std::unique_ptr<Model> model = LoadGraphModel("examples/models/wide_and_deep.yaml");
  ASSERT_NE(model, nullptr);
  absl::StatusOr<GraphDef> graph = ModelGraph(*model, ComputeShardLayout(*model, 2), {});
  ASSERT_TRUE(graph.ok());
  MemEnv env;
  {
    std::unique_ptr<EventWriter> writer = *EventWriter::Create(&env, "/job", absl::Seconds(1));
    ASSERT_TRUE(writer->WriteGraph(*graph).ok());
  }
  absl::StatusOr<std::vector<std::string>> files = env.ListDir("/job");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  const std::string path = "/job/" + (*files)[0];
  const std::string contents = *env.ReadFile(path);
  RecordReader reader(contents, path);
  int graphs = 0;
  while (true) {
    absl::StatusOr<std::string_view> record = reader.ReadRecord();
    if (!record.ok()) break;
    tensorboard::Event event;
    ASSERT_TRUE(event.ParseFromArray(record->data(), static_cast<int>(record->size())));
    if (event.what_case() != tensorboard::Event::kGraphDef) continue;
    ++graphs;
    GraphDef read;
    ASSERT_TRUE(read.ParseFromString(event.graph_def()));
    EXPECT_EQ(read.node_size(), graph->node_size());
    ExpectGraphOf(*model, read, 2, "wide_and_deep (read back)");
  }
  EXPECT_EQ(graphs, 1);
  absl::StatusOr<std::string> inspected = InspectEventDir(&env, "/job");
  ASSERT_TRUE(inspected.ok()) << inspected.status();
  EXPECT_NE(inspected->find("graph"), std::string::npos) << *inspected;
}

}  // namespace
}  // namespace pstrain
