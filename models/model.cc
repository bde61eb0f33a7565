#include "models/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "models/random.h"

namespace pstrain {
namespace {

// Standard normal from two uniforms (Box-Muller).
float Normal(SplitMix64& rng) {
  float u1 = rng.Uniform();
  const float u2 = rng.Uniform();
  if (u1 < 1e-12f) u1 = 1e-12f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
}

void InitializeVariable(const VariableSpec& spec, uint64_t seed, float* out, int64_t n) {
  SplitMix64 rng(seed);
  switch (spec.initializer.kind) {
    case Initializer::kZeros:
      std::fill_n(out, n, 0.0f);
      break;
    case Initializer::kOnes:
      std::fill_n(out, n, 1.0f);
      break;
    case Initializer::kGlorotUniform: {
      const float limit = std::sqrt(6.0f / static_cast<float>(spec.fan_in + spec.fan_out));
      for (int64_t i = 0; i < n; ++i) out[i] = (2.0f * rng.Uniform() - 1.0f) * limit;
      break;
    }
    case Initializer::kHeNormal: {
      const float stddev = std::sqrt(2.0f / static_cast<float>(spec.fan_in));
      for (int64_t i = 0; i < n; ++i) out[i] = Normal(rng) * stddev;
      break;
    }
    case Initializer::kTruncatedNormal:
      for (int64_t i = 0; i < n; ++i) {
        float z = Normal(rng);
        while (std::abs(z) > 2.0f) z = Normal(rng);  // P(redraw) = 4.6%
        out[i] = z * spec.initializer.stddev;
      }
      break;
    case Initializer::kConstant:
      std::fill_n(out, n, spec.initializer.value);
      break;
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(std::string name, Shape input_shape,
                                                     int num_classes,
                                                     std::vector<std::unique_ptr<Layer>> layers) {
  return Create(std::move(name), std::move(input_shape), num_classes, std::move(layers), {});
}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(std::string name, Shape input_shape,
                                                     int num_classes,
                                                     std::vector<std::unique_ptr<Layer>> layers,
                                                     std::vector<std::vector<int>> inputs,
                                                     Head head, RegressionLossOptions regression) {
  ModelHead only;
  only.kind = head;
  only.num_classes = num_classes;
  only.regression = regression;
  return Build(std::move(name), std::move(input_shape), {only}, std::move(layers),
               std::move(inputs));
}

absl::StatusOr<std::unique_ptr<Model>> Model::CreateWithHeads(
    std::string name, Shape input_shape, std::vector<ModelHead> heads,
    std::vector<std::unique_ptr<Layer>> layers, std::vector<std::vector<int>> inputs) {
  if (heads.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", name, " has ", heads.size(), " heads; Create makes a model of one"));
  }
  for (const ModelHead& head : heads) {
    if (head.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", name, ": each of its heads needs a name"));
    }
  }
  return Build(std::move(name), std::move(input_shape), std::move(heads), std::move(layers),
               std::move(inputs));
}

absl::StatusOr<std::unique_ptr<Model>> Model::Build(std::string name, Shape input_shape,
                                                    std::vector<ModelHead> heads,
                                                    std::vector<std::unique_ptr<Layer>> layers,
                                                    std::vector<std::vector<int>> inputs) {
  std::unique_ptr<Model> model(new Model);
  model->name_ = std::move(name);
  model->input_shape_ = input_shape;
  if (inputs.empty()) {
    for (size_t i = 0; i < layers.size(); ++i) inputs.push_back({static_cast<int>(i)});
  }
  if (inputs.size() != layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": ", layers.size(),
                                                   " layers but ", inputs.size(), " input lists"));
  }
  std::vector<Shape> shapes = {input_shape};  // per activation
  std::vector<int> act_mask = {-1};           // per activation: Model::act_mask_
  std::vector<int> uses(layers.size() + 1, 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    Layer* layer = layers[i].get();
    auto* merge = dynamic_cast<MergeLayer*>(layer);
    auto* multi = dynamic_cast<MultiInputLayer*>(layer);
    const std::vector<int>& in = inputs[i];
    if (merge != nullptr ? in.size() < 2
                         : in.empty() || in.size() > (multi ? multi->MaxInputs() : size_t{1})) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", model->name_, ": layer ", layer->name(), " takes ",
                       merge != nullptr   ? "two inputs or more"
                       : multi != nullptr ? absl::StrCat("1 to ", multi->MaxInputs(), " inputs")
                                          : "one input",
                       ", got ", in.size()));
    }
    std::vector<Shape> in_shapes;
    for (int a : in) {
      if (a < 0 || a > static_cast<int>(i)) {
        return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": layer ",
                                                       layer->name(), " takes activation ", a,
                                                       ", which is not before it"));
      }
      in_shapes.push_back(shapes[a]);
      ++uses[a];
    }
    absl::StatusOr<Shape> out = BuildLayer(layer, in_shapes);
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", model->name_, ": ", out.status().message()));
    }
    for (int a : in) {
      if (act_mask[a] >= 0 && layer->MixesPositions()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model ", model->name_, ": layer ", layer->name(),
            " takes statistics over every position of the batch, padding included, so it "
            "cannot take the padded sequence of ",
            layers[act_mask[a]]->name(), "; use layer_norm"));
      }
    }
    // The output's mask: its own, one of an input's, or none. Inputs that
    // go into a sequence with a mask have that mask or none.
    int mask = -1;
    if (layer->MakesMask()) {
      mask = static_cast<int>(i);
    } else if (const int from = layer->MaskFrom(in_shapes, *out); from >= 0) {
      mask = act_mask[in[from]];
      for (size_t k = 0; k < in.size() && merge != nullptr; ++k) {
        if (act_mask[in[k]] >= 0 && mask >= 0 && act_mask[in[k]] != mask) {
          return absl::InvalidArgumentError(absl::StrCat(
              "model ", model->name_, ": layer ", layer->name(),
              " joins sequences padded differently (the masks of ", layers[mask]->name(), " and ",
              layers[act_mask[in[k]]]->name(), "); pool them first (sequence_pool)"));
        }
        if (mask < 0) mask = act_mask[in[k]];
      }
    }
    act_mask.push_back(mask);
    std::vector<int64_t> offsets;
    int64_t first_param = -1;
    int64_t param_end = -1;
    for (VariableSpec spec : layer->Variables()) {
      if (spec.trainable && layer->frozen()) spec.frozen = true;
      if (!spec.trainable && layer->state_decay() >= 0) spec.decay = layer->state_decay();
      VariableInfo info;
      info.name = absl::StrCat(layer->name(), "/", spec.name);
      info.shape = spec.shape;
      info.trainable = spec.trainable;
      info.size = NumElements(spec.shape);
      int64_t& cursor = spec.trainable ? model->num_params_ : model->num_state_;
      info.offset = cursor;
      cursor += info.size;
      info.spec = spec;
      info.layer = static_cast<int>(i);
      offsets.push_back(info.offset);
      if (spec.trainable && first_param < 0) first_param = info.offset;
      if (spec.trainable) param_end = info.offset + info.size;
      model->variables_.push_back(std::move(info));
    }
    layer->BindOffsets(std::move(offsets));
    if (absl::Status bound = model->BindSparseTables(layer); !bound.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", model->name_, ": ", bound.message()));
    }
    model->layer_first_param_.push_back(first_param);
    model->layer_param_end_.push_back(param_end);
    shapes.push_back(*out);
    if (in != std::vector<int>{static_cast<int>(i)}) model->chain_ = false;
  }
  const int last = static_cast<int>(layers.size());
  std::vector<bool> head_at(layers.size() + 1, false);
  for (ModelHead& head : heads) {
    const std::string what =
        head.name.empty() ? std::string("a") : absl::StrCat("head ", head.name, ": a");
    if (head.activation < 0) head.activation = last;
    if (head.activation < 1 || head.activation > last) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": head ", head.name,
                                                     " takes activation ", head.activation,
                                                     ", which is no layer's output"));
    }
    if (head_at[head.activation]) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model->name_,
                                                     ": two heads take the output of layer ",
                                                     layers[head.activation - 1]->name()));
    }
    head_at[head.activation] = true;
    ++uses[head.activation];
    if (head.kind == Head::kBinary && head.num_classes != 2) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": ", what,
                                                     " binary head has 2 classes, not ",
                                                     head.num_classes));
    }
    if (head.kind == Head::kRegression && head.num_classes != 0) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": ", what,
                                                     " regression head has no classes, not ",
                                                     head.num_classes));
    }
    if (head.kind == Head::kSoftmax && head.num_classes < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", model->name_, ": ", what, " softmax head has classes, not ", head.num_classes));
    }
    const RegressionLossOptions& regression = head.regression;
    if (head.kind == Head::kRegression && regression.loss == RegressionLoss::kHuber &&
        !(regression.huber_delta > 0 && std::isfinite(regression.huber_delta))) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": huber_delta ",
                                                     regression.huber_delta,
                                                     " is not a positive number"));
    }
    if (!(head.weight > 0 && std::isfinite(head.weight))) {
      return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": head ", head.name,
                                                     " has weight ", head.weight,
                                                     ", not a positive number"));
    }
    if (shapes[head.activation] != Shape{head.num_logits()}) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", model->name_, ": output shape ", ShapeToString(shapes[head.activation]),
          head.name.empty() ? "" : absl::StrCat(" of layer ", layers[head.activation - 1]->name()),
          " is not [", head.num_logits(), "] logits",
          head.name.empty() ? "" : absl::StrCat(" (head ", head.name, ")")));
    }
    model->head_offsets_.push_back(model->num_logits_);
    model->num_logits_ += head.num_logits();
  }
  for (size_t a = 1; a <= layers.size(); ++a) {
    if (uses[a] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", model->name_, ": the output of layer ", layers[a - 1]->name(),
                       " is not taken by any later layer", heads.size() > 1 ? " or head" : ""));
    }
  }
  // Several heads seed the gradients of several activations: a graph's
  // backward pass.
  if (heads.size() > 1) model->chain_ = false;
  model->heads_ = std::move(heads);
  model->layers_ = std::move(layers);
  model->inputs_ = std::move(inputs);
  model->act_mask_ = std::move(act_mask);
  model->shapes_ = std::move(shapes);
  model->acts_.resize(model->layers_.size() + 1);
  return model;
}

const std::string& Model::layer_name(size_t i) const { return layers_[i]->name(); }

void Model::set_spec(std::optional<ModelSpec> spec) {
  spec_yaml_ = spec ? ModelSpecToYaml(*spec) : "";
  spec_ = std::move(spec);
}

void Model::InitializeVariables(uint64_t seed, float* params, float* state) const {
  for (size_t i = 0; i < variables_.size(); ++i) {
    const VariableInfo& v = variables_[i];
    float* base = v.trainable ? params : state;
    InitializeVariable(v.spec, MixSeeds(seed, i), base + v.offset, v.size);
  }
}

void Model::Forward(const float* params, const float* state, const float* images, int64_t batch,
                    bool training, uint64_t seed, float* batch_stats, const SparseStep* sparse,
                    const std::function<void(int64_t)>* params_ready) {
  acts_[0].Resize(Batched(batch, input_shape_));
  // A model of sparse features alone has an empty dense input (input: [0]).
  if (acts_[0].size() > 0) std::memcpy(acts_[0].data(), images, acts_[0].size() * sizeof(float));
  if (!sparse_tables_.empty() && sparse == nullptr) {
    std::fprintf(stderr, "model %s has sparse layers: its passes need a SparseStep\n",
                 name_.c_str());
    std::abort();
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    // Parameters may still be arriving (a parameter client that overlaps
    // its pull with this pass): wait for this layer's.
    if (params_ready != nullptr && layer_param_end_[i] > 0) (*params_ready)(layer_param_end_[i]);
    ForwardArgs args;
    args.training = training;
    args.seed = MixSeeds(seed, i);
    args.params = params;
    args.state = state;
    args.batch_stats = batch_stats;
    args.sparse = sparse;
    args.lengths = InputLengths(i);
    const auto start = std::chrono::steady_clock::now();
    ScopedTraceEvent event(trace_, "forward",
                           trace_ != nullptr ? std::string_view(forward_names_[i]) : "");
    if (chain_) {
      layers_[i]->Forward(acts_[i], &acts_[i + 1], args);
    } else if (inputs_[i].size() > 1) {
      std::vector<const Tensor*> in;
      for (int a : inputs_[i]) in.push_back(&acts_[a]);
      if (auto* merge = dynamic_cast<MergeLayer*>(layers_[i].get())) {
        merge->ForwardMerge(in, &acts_[i + 1]);
      } else {
        static_cast<MultiInputLayer*>(layers_[i].get())->ForwardInputs(in, &acts_[i + 1], args);
      }
    } else {
      layers_[i]->Forward(acts_[inputs_[i][0]], &acts_[i + 1], args);
    }
    ZeroPadding(i + 1, &acts_[i + 1]);
    if (profiling_) timings_[i].forward_secs += SecondsSince(start);
  }
  if (multi_head()) {
    outputs_.Resize({batch, num_logits_});
    for (size_t h = 0; h < heads_.size(); ++h) {
      const Tensor& out = acts_[heads_[h].activation];
      const int width = heads_[h].num_logits();
      for (int64_t b = 0; b < batch; ++b) {
        std::memcpy(outputs_.data() + b * num_logits_ + head_offsets_[h], out.data() + b * width,
                    width * sizeof(float));
      }
    }
  }
}

LossResult Model::TrainStep(const float* params, const float* state, const float* images,
                            const float* labels, int64_t batch, uint64_t seed, float* grads,
                            float* batch_stats, const std::function<void(int64_t)>& grads_ready,
                            SparseStep* sparse, const std::function<void(int64_t)>& params_ready) {
  if (num_state_ > 0) std::memcpy(batch_stats, state, num_state_ * sizeof(float));
  Forward(params, state, images, batch, /*training=*/true, seed, batch_stats, sparse,
          params_ready ? &params_ready : nullptr);
  // Every parameter has arrived before the backward pass (which also reads
  // them) begins.
  if (params_ready) params_ready(num_params_);
  BackwardArgs args;
  args.params = params;
  args.grads = grads;
  args.sparse = sparse;
  if (sparse != nullptr) {
    for (size_t t = 0; t < sparse->tables.size(); ++t) {
      TableStep& table = sparse->tables[t];
      table.grads.assign(table.ids.size() * sparse_tables_[t].dim, 0.0f);
    }
  }
  if (!chain_) {
    act_grads_.resize(acts_.size());
    act_grad_set_.assign(acts_.size(), false);
    LossResult result = Loss(labels, &act_grads_.back());
    GraphBackward(args, grads_ready);
    return result;
  }
  Tensor* dout = &grad_a_;
  Tensor* din = &grad_b_;
  LossResult result = Loss(labels, dout);
  for (size_t i = layers_.size(); i-- > 0;) {
    const auto start = std::chrono::steady_clock::now();
    ScopedTraceEvent event(trace_, "backward",
                           trace_ != nullptr ? std::string_view(backward_names_[i]) : "");
    ZeroPadding(i + 1, dout);
    args.lengths = InputLengths(i);
    layers_[i]->Backward(acts_[i], acts_[i + 1], *dout, i == 0 ? nullptr : din, args);
    if (profiling_) timings_[i].backward_secs += SecondsSince(start);
    if (grads_ready && layer_first_param_[i] >= 0) grads_ready(layer_first_param_[i]);
    std::swap(dout, din);
  }
  return result;
}

void Model::GraphBackward(BackwardArgs args, const std::function<void(int64_t)>& grads_ready) {
  // Loss set the heads' activations' gradients (act_grad_set_).
  // Where layer i's gradient for its input activation `a` goes: straight into
  // act_grads_[a] for the first layer to reach it (layers run from the last
  // back), into the scratch tensor to be added for the others; none for the
  // model's input.
  auto target = [this](int a) -> Tensor* {
    if (a == 0) return nullptr;
    return act_grad_set_[a] ? &grad_scratch_ : &act_grads_[a];
  };
  auto land = [this](int a, Tensor* written) {
    if (a == 0) return;
    if (written == &grad_scratch_) {
      float* sum = act_grads_[a].data();
      const float* g = grad_scratch_.data();
      for (int64_t k = 0; k < grad_scratch_.size(); ++k) sum[k] += g[k];
    }
    act_grad_set_[a] = true;
  };
  for (size_t i = layers_.size(); i-- > 0;) {
    const auto start = std::chrono::steady_clock::now();
    ScopedTraceEvent event(trace_, "backward",
                           trace_ != nullptr ? std::string_view(backward_names_[i]) : "");
    ZeroPadding(i + 1, &act_grads_[i + 1]);
    const Tensor& dout = act_grads_[i + 1];
    const std::vector<int>& in = inputs_[i];
    args.lengths = InputLengths(i);
    auto* multi = dynamic_cast<MultiInputLayer*>(layers_[i].get());
    if (multi != nullptr && in.size() > 1) {
      // Every input's gradient in one call: each straight into its
      // activation's sum when it is the first to reach it, else into a
      // scratch tensor of its own to be added.
      std::vector<const Tensor*> ins;
      std::vector<Tensor*> din(in.size(), nullptr);
      multi_scratch_.resize(std::max(multi_scratch_.size(), in.size()));
      for (size_t k = 0; k < in.size(); ++k) {
        ins.push_back(&acts_[in[k]]);
        if (in[k] == 0) continue;
        const bool taken =
            act_grad_set_[in[k]] || std::find(in.begin(), in.begin() + k, in[k]) != in.begin() + k;
        din[k] = taken ? &multi_scratch_[k] : &act_grads_[in[k]];
      }
      multi->BackwardInputs(ins, acts_[i + 1], dout, din, args);
      for (size_t k = 0; k < in.size(); ++k) {
        if (din[k] == &act_grads_[in[k]]) act_grad_set_[in[k]] = true;
      }
      for (size_t k = 0; k < in.size(); ++k) {
        if (din[k] == nullptr || din[k] == &act_grads_[in[k]]) continue;
        float* sum = act_grads_[in[k]].data();
        const float* g = din[k]->data();
        for (int64_t j = 0; j < din[k]->size(); ++j) sum[j] += g[j];
      }
    } else if (auto* merge = dynamic_cast<MergeLayer*>(layers_[i].get())) {
      // One input at a time, so that the scratch tensor serves them all.
      std::vector<const Tensor*> ins;
      for (int a : in) ins.push_back(&acts_[a]);
      for (size_t k = 0; k < in.size(); ++k) {
        std::vector<Tensor*> din(in.size(), nullptr);
        din[k] = target(in[k]);
        merge->BackwardMerge(ins, dout, din);
        land(in[k], din[k]);
      }
    } else {
      Tensor* din = target(in[0]);
      layers_[i]->Backward(acts_[in[0]], acts_[i + 1], dout, din, args);
      land(in[0], din);
    }
    if (profiling_) timings_[i].backward_secs += SecondsSince(start);
    if (grads_ready && layer_first_param_[i] >= 0) grads_ready(layer_first_param_[i]);
  }
}

std::vector<const int32_t*> Model::InputLengths(size_t layer) const {
  std::vector<const int32_t*> lengths;
  for (int a : inputs_[layer]) {
    const int mask = act_mask_[a];
    lengths.push_back(mask >= 0 ? layers_[mask]->MadeLengths()->data() : nullptr);
  }
  if (std::all_of(lengths.begin(), lengths.end(), [](const int32_t* p) { return !p; })) {
    lengths.clear();
  }
  return lengths;
}

void Model::ZeroPadding(size_t activation, Tensor* t) const {
  const int mask = act_mask_[activation];
  if (mask < 0) return;
  const std::vector<int32_t>& lengths = *layers_[mask]->MadeLengths();
  const int64_t batch = t->dim(0);
  const int64_t length = t->dim(1);
  const int64_t row = t->size() / std::max<int64_t>(batch * length, 1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t valid = std::min<int64_t>(lengths[b], length);
    std::fill(t->data() + (b * length + valid) * row, t->data() + (b + 1) * length * row, 0.0f);
  }
}

void Model::set_trace(TraceRecorder* trace) {
  trace_ = trace;
  forward_names_.clear();
  backward_names_.clear();
  for (const auto& layer : layers_) {
    forward_names_.push_back("forward " + layer->name());
    backward_names_.push_back("backward " + layer->name());
  }
}

void Model::EnableProfiling(bool on) {
  profiling_ = on;
  timings_.clear();
  for (const auto& layer : layers_) timings_.push_back({layer->name()});
}

LossResult Model::Evaluate(const float* params, const float* state, const float* images,
                           const float* labels, int64_t batch, const SparseStep* sparse) {
  Forward(params, state, images, batch, /*training=*/false, 0, nullptr, sparse);
  return Loss(labels, nullptr);
}

const Tensor& Model::Infer(const float* params, const float* state, const float* images,
                           int64_t batch, const SparseStep* sparse) {
  Forward(params, state, images, batch, /*training=*/false, 0, nullptr, sparse);
  return logits();
}

namespace {

LossResult HeadLoss(const ModelHead& head, const Tensor& logits, const float* labels,
                    Tensor* dlogits) {
  switch (head.kind) {
    case Head::kBinary:
      return SigmoidCrossEntropy(logits, labels, dlogits);
    case Head::kRegression:
      return RegressionLossOf(logits, labels, head.regression, dlogits);
    case Head::kSoftmax:
      break;
  }
  return SoftmaxCrossEntropy(logits, labels, dlogits);
}

}  // namespace

LossResult Model::Loss(const float* labels, Tensor* dlogits) {
  if (!multi_head()) {
    LossResult result = HeadLoss(heads_[0], acts_.back(), labels, dlogits);
    if (!chain_ && dlogits != nullptr) act_grad_set_.back() = true;
    return result;
  }
  const int64_t batch = acts_[0].dim(0);
  const size_t n = heads_.size();
  head_losses_.resize(n);
  head_labels_.resize(batch);
  LossResult total;
  for (size_t h = 0; h < n; ++h) {
    const ModelHead& head = heads_[h];
    for (int64_t b = 0; b < batch; ++b) head_labels_[b] = labels[b * n + h];
    Tensor* grad = dlogits != nullptr ? &act_grads_[head.activation] : nullptr;
    const LossResult r = HeadLoss(head, acts_[head.activation], head_labels_.data(), grad);
    if (grad != nullptr) {
      if (head.weight != 1.0f) {
        for (int64_t k = 0; k < grad->size(); ++k) grad->data()[k] *= head.weight;
      }
      act_grad_set_[head.activation] = true;
    }
    head_losses_[h] = r;
    total.loss_sum += head.weight * r.loss_sum;
  }
  total.correct = head_losses_[0].correct;
  total.abs_error_sum = head_losses_[0].abs_error_sum;
  total.squared_error_sum = head_losses_[0].squared_error_sum;
  return total;
}

int64_t Model::ForwardMultiplyAdds() const {
  int64_t total = 0;
  for (const auto& layer : layers_) total += layer->ForwardMultiplyAdds();
  return total;
}

}  // namespace pstrain
