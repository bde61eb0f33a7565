#ifndef PSTRAIN_CHIEF_MODEL_GRAPH_H_
#define PSTRAIN_CHIEF_MODEL_GRAPH_H_

// A model as the GraphDef TensorBoard's GRAPHS tab draws (proto/graph.proto,
// TensorFlow's field numbers): what tf.summary.FileWriter(graph=...) writes
// for a TF 1.x job, built from the model's spec and where its variables
// live, so "color by device" shows the sharding.

#include <string>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "proto/graph.pb.h"
#include "ps_protocol/shard_layout.h"

namespace pstrain {

// What the graph says besides the model.
struct ModelGraphOptions {
  std::string optimizer = "adam";               // the dense variables'
  std::string embedding_optimizer = "adagrad";  // the tables'
  int num_ps = 1;
};

// The graph of `model` (built from its spec: Model::spec() must not be
// null):
//  - "input" (op Placeholder, its shape) and one node per spec layer, named
//    as the layer (a '/' in the name is a name scope, so blocks fold), op
//    its type (conv2d, dense, ...), inputs the layers it takes and its
//    variables and tables, device /job:worker, attrs its output shape
//    (_output_shapes, the batch -1) and its spec line;
//  - one node per variable ("conv2d_1/kernel", op VariableV2, attrs shape
//    and dtype), device /job:ps/replica:0/task:<i> of the ps that holds its
//    first value (`layout`);
//  - one node per embedding table (op EmbeddingTable, attrs dim, buckets (0:
//    dynamic), feature, optimizer and partitioner), device /job:ps: its
//    rows are spread over every ps by id;
//  - per head a "labels" placeholder and a loss node (op
//    SigmoidCrossEntropy, SparseSoftmaxCrossEntropy or the regression loss)
//    taking the head's layer, their weighted sum "loss" for several heads,
//    and the optimizer's node ("Adam", ...) taking the loss.
// InvalidArgument for a model without a spec.
absl::StatusOr<tensorboard::GraphDef> ModelGraph(const Model& model, const ShardLayout& layout,
                                                 const ModelGraphOptions& options);

}  // namespace pstrain

#endif  // PSTRAIN_CHIEF_MODEL_GRAPH_H_
