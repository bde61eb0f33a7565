#ifndef PSTRAIN_MODELS_LAYER_H_
#define PSTRAIN_MODELS_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/sparse_input.h"
#include "models/tensor.h"

namespace pstrain {

enum class Initializer {
  kZeros,
  kOnes,
  kGlorotUniform,    // TensorFlow's default kernel initializer.
  kHeNormal,         // Truncated-free He et al. normal, for ReLU nets.
  kTruncatedNormal,  // normal(0, stddev), redrawn beyond 2 stddev (tf.truncated_normal)
  kConstant,         // `value` everywhere
};

// An initializer with its parameters. Converts from a bare Initializer.
struct InitializerSpec {
  InitializerSpec() = default;
  InitializerSpec(Initializer k) : kind(k) {}  // NOLINT(google-explicit-constructor)
  Initializer kind = Initializer::kZeros;
  float stddev = 0.05f;  // kTruncatedNormal (Keras' default)
  float value = 0.0f;    // kConstant
  bool operator==(const InitializerSpec&) const = default;
};

// A variable a layer declares. Trainable variables are concatenated into the
// model's flat parameter vector (what the parameter servers shard); the others
// (batch-norm moving statistics) into its flat state vector.
struct VariableSpec {
  std::string name;  // Relative to the layer ("kernel"); the model prefixes the layer name.
  Shape shape;
  bool trainable = true;
  InitializerSpec initializer = Initializer::kZeros;
  // Glorot/He fan sizes for kernels; ignored by the constant initializers.
  int64_t fan_in = 0;
  int64_t fan_out = 0;
  // Trainable variables of a layer with `trainable: false` in its spec: kept
  // as they are by the optimizer (no update, no weight decay).
  bool frozen = false;
  // State (trainable false): the moving-average decay of its statistics
  // (batch_norm's momentum); < 0: the job's batch_norm_decay.
  float decay = -1.0f;
};

// What a forward pass reads and writes besides activations.
struct ForwardArgs {
  bool training = false;
  uint64_t seed = 0;              // Randomness of this step (dropout).
  const float* params = nullptr;  // The model's flat trainable vector.
  const float* state = nullptr;   // The model's flat state vector.
  // Training only: where layers with batch statistics (batch norm) write them,
  // at the same offsets as their state variables. May be null in eval.
  float* batch_stats = nullptr;
  // The rows of the embedding tables this batch touches (models with sparse
  // layers; Model::PrepareSparse); null for a model without any.
  const SparseStep* sparse = nullptr;
  // Per input, for a sequence ([L, ...] per example) that has a mask: each
  // example's count of valid positions, the first ones (the rest are
  // padding); null for an input without one. Empty when no input has one.
  std::vector<const int32_t*> lengths = {};
  const int32_t* length_of(size_t input) const {
    return input < lengths.size() ? lengths[input] : nullptr;
  }
};

struct BackwardArgs {
  const float* params = nullptr;
  float* grads = nullptr;  // Layers overwrite their own range of the flat gradient.
  // Sparse layers add their rows' gradients to sparse->tables[t].grads
  // (zeroed by the model before the backward pass).
  SparseStep* sparse = nullptr;
  // As ForwardArgs::lengths.
  std::vector<const int32_t*> lengths = {};
  const int32_t* length_of(size_t input) const {
    return input < lengths.size() ? lengths[input] : nullptr;
  }
};

// One layer of a feed-forward model, with its backward pass. Tensors are
// batched: dimension 0 is the example. A layer keeps what its backward pass
// needs from the last forward pass (argmax indices, dropout masks, normalized
// activations), so an instance serves one model on one thread at a time; work
// inside a call is spread over the oneTBB pool, split by examples so results do
// not depend on the number of threads.
class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }

  // Set from the spec before the model is made (Model::Create applies them
  // to the layer's variables): `trainable: false` freezes its trainable
  // variables; a state decay >= 0 is its statistics' moving-average decay.
  void set_frozen(bool frozen) { frozen_ = frozen; }
  bool frozen() const { return frozen_; }
  void set_state_decay(float decay) { state_decay_ = decay; }
  float state_decay() const { return state_decay_; }

  // Fixes variable shapes for inputs of shape `input` (one example, no batch
  // dimension) and returns the shape of one output example. InvalidArgument if
  // the layer cannot take that input.
  virtual absl::StatusOr<Shape> Build(const Shape& input) = 0;

  // Valid after Build().
  virtual std::vector<VariableSpec> Variables() const { return {}; }
  // Valid after Build(): the multiply-adds of one example's forward pass in
  // the layer's products (convolutions, dense layers; 0 for the rest), for
  // benchmarks' FLOP rates.
  virtual int64_t ForwardMultiplyAdds() const { return 0; }
  // Valid after Build(): the embedding tables it declares (models/embedding.h).
  virtual std::vector<SparseTableSpec> SparseTables() const { return {}; }
  // Where each table of SparseTables() is among the model's tables
  // (SparseStep::tables), and its feature among the model's sparse features
  // (SparseStep::offsets).
  virtual void BindSparse(std::vector<int> /*tables*/, std::vector<int> /*features*/) {}

  // Sequences and their masks. A layer that makes a sequence with padding (a
  // sequence embedding) returns its lengths of the last forward pass, one per
  // example (ForwardArgs::lengths), from MadeLengths(); MakesMask() says so
  // once built. Every other layer's output carries the mask of its input
  // number MaskFrom() (or none: -1). The default: input 0's when the output
  // is a sequence of the same length ([L, ...] from [L, ...]). The model
  // zeroes the padded positions of every output with a mask, and their
  // gradients, so padding never reaches an output or a gradient through
  // any layer.
  virtual bool MakesMask() const { return false; }
  virtual const std::vector<int32_t>* MadeLengths() const { return nullptr; }
  virtual int MaskFrom(const std::vector<Shape>& inputs, const Shape& output) const;
  // True for a layer whose output at one position depends on other
  // positions' values through statistics over the batch (batch_norm): the
  // model refuses to give it a sequence with padding.
  virtual bool MixesPositions() const { return false; }

  // Where each variable of Variables() lives: an offset into the params vector
  // for trainable ones, into the state vector for the others.
  // Composite layers override it to hand their sublayers their share.
  virtual void BindOffsets(std::vector<int64_t> offsets) { offsets_ = std::move(offsets); }

  // `out` is resized by the layer.
  virtual void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) = 0;

  // Given dL/d(out), writes dL/d(in) into `din` (skipped when null: the first
  // layer needs no input gradient) and dL/d(variables) into args.grads. `in`
  // and `out` are those of the last Forward call, which must have been a
  // training pass for layers that behave differently in training.
  virtual void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                        const BackwardArgs& args) = 0;

 protected:
  int64_t offset(int i) const { return offsets_[i]; }

 private:
  std::string name_;
  std::vector<int64_t> offsets_;
  bool frozen_ = false;
  float state_decay_ = -1.0f;
};

// A layer of several inputs (add, concat) in a model whose layers form a
// graph. The model hands it every input; the single-input entry points are
// never called (they fail a CHECK).
class MergeLayer : public Layer {
 public:
  using Layer::Layer;

  // Every input's shape (one example each); the output's, or InvalidArgument
  // naming the shapes that do not fit together.
  virtual absl::StatusOr<Shape> BuildMerge(const std::vector<Shape>& inputs) = 0;
  virtual void ForwardMerge(const std::vector<const Tensor*>& in, Tensor* out) = 0;
  // dL/d(in[k]) into din[k] (each resized by the layer).
  virtual void BackwardMerge(const std::vector<const Tensor*>& in, const Tensor& dout,
                             const std::vector<Tensor*>& din) = 0;

  absl::StatusOr<Shape> Build(const Shape& input) final;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) final;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) final;
};

// A layer of one input or more (up to MaxInputs()) that reads the pass's
// arguments (variables, masks): attention whose query is another layer's
// output. Built for one input (where BuildInputs takes one), it serves as
// any other layer.
class MultiInputLayer : public Layer {
 public:
  using Layer::Layer;

  virtual size_t MaxInputs() const = 0;
  virtual absl::StatusOr<Shape> BuildInputs(const std::vector<Shape>& inputs) = 0;
  virtual void ForwardInputs(const std::vector<const Tensor*>& in, Tensor* out,
                             const ForwardArgs& args) = 0;
  // dL/d(in[k]) into din[k] where not null (each resized by the layer).
  virtual void BackwardInputs(const std::vector<const Tensor*>& in, const Tensor& out,
                              const Tensor& dout, const std::vector<Tensor*>& din,
                              const BackwardArgs& args) = 0;

  absl::StatusOr<Shape> Build(const Shape& input) final { return BuildInputs({input}); }
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) final {
    ForwardInputs({&in}, out, args);
  }
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) final {
    BackwardInputs({&in}, out, dout, {din}, args);
  }
};

// Builds `layer` for its inputs' shapes, whatever its kind (merge,
// multi-input or single), after checking their count; InvalidArgument naming
// the layer if the count or a shape does not fit.
absl::StatusOr<Shape> BuildLayer(Layer* layer, const std::vector<Shape>& inputs);

// Shape of a batch of `batch` examples of per-example shape `example`.
inline Shape Batched(int64_t batch, const Shape& example) {
  Shape s{batch};
  s.insert(s.end(), example.begin(), example.end());
  return s;
}

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_LAYER_H_
