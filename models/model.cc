#include "models/model.h"

#include <chrono>
#include <cmath>
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
  switch (spec.initializer) {
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
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Create(std::string name, Shape input_shape,
                                                     int num_classes,
                                                     std::vector<std::unique_ptr<Layer>> layers) {
  std::unique_ptr<Model> model(new Model);
  model->name_ = std::move(name);
  model->input_shape_ = input_shape;
  model->num_classes_ = num_classes;
  Shape shape = input_shape;
  for (auto& layer : layers) {
    absl::StatusOr<Shape> out = layer->Build(shape);
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model ", model->name_, ": ", out.status().message()));
    }
    std::vector<int64_t> offsets;
    int64_t first_param = -1;
    for (const VariableSpec& spec : layer->Variables()) {
      VariableInfo info;
      info.name = absl::StrCat(layer->name(), "/", spec.name);
      info.shape = spec.shape;
      info.trainable = spec.trainable;
      info.size = NumElements(spec.shape);
      int64_t& cursor = spec.trainable ? model->num_params_ : model->num_state_;
      info.offset = cursor;
      cursor += info.size;
      info.spec = spec;
      offsets.push_back(info.offset);
      if (spec.trainable && first_param < 0) first_param = info.offset;
      model->variables_.push_back(std::move(info));
    }
    layer->BindOffsets(std::move(offsets));
    model->layer_first_param_.push_back(first_param);
    shape = *out;
  }
  if (shape != Shape{num_classes}) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model->name_, ": output shape ",
                                                   ShapeToString(shape), " is not [", num_classes,
                                                   "] logits"));
  }
  model->layers_ = std::move(layers);
  model->acts_.resize(model->layers_.size() + 1);
  return model;
}

void Model::InitializeVariables(uint64_t seed, float* params, float* state) const {
  for (size_t i = 0; i < variables_.size(); ++i) {
    const VariableInfo& v = variables_[i];
    float* base = v.trainable ? params : state;
    InitializeVariable(v.spec, MixSeeds(seed, i), base + v.offset, v.size);
  }
}

void Model::Forward(const float* params, const float* state, const float* images, int64_t batch,
                    bool training, uint64_t seed, float* batch_stats) {
  acts_[0].Resize(Batched(batch, input_shape_));
  std::memcpy(acts_[0].data(), images, acts_[0].size() * sizeof(float));
  for (size_t i = 0; i < layers_.size(); ++i) {
    ForwardArgs args;
    args.training = training;
    args.seed = MixSeeds(seed, i);
    args.params = params;
    args.state = state;
    args.batch_stats = batch_stats;
    const auto start = std::chrono::steady_clock::now();
    ScopedTraceEvent event(trace_, "forward",
                           trace_ != nullptr ? std::string_view(forward_names_[i]) : "");
    layers_[i]->Forward(acts_[i], &acts_[i + 1], args);
    if (profiling_) timings_[i].forward_secs += SecondsSince(start);
  }
}

LossResult Model::TrainStep(const float* params, const float* state, const float* images,
                            const int32_t* labels, int64_t batch, uint64_t seed, float* grads,
                            float* batch_stats, const std::function<void(int64_t)>& grads_ready) {
  if (num_state_ > 0) std::memcpy(batch_stats, state, num_state_ * sizeof(float));
  Forward(params, state, images, batch, /*training=*/true, seed, batch_stats);
  Tensor* dout = &grad_a_;
  Tensor* din = &grad_b_;
  LossResult result = SoftmaxCrossEntropy(acts_.back(), labels, dout);
  BackwardArgs args;
  args.params = params;
  args.grads = grads;
  for (size_t i = layers_.size(); i-- > 0;) {
    const auto start = std::chrono::steady_clock::now();
    ScopedTraceEvent event(trace_, "backward",
                           trace_ != nullptr ? std::string_view(backward_names_[i]) : "");
    layers_[i]->Backward(acts_[i], acts_[i + 1], *dout, i == 0 ? nullptr : din, args);
    if (profiling_) timings_[i].backward_secs += SecondsSince(start);
    if (grads_ready && layer_first_param_[i] >= 0) grads_ready(layer_first_param_[i]);
    std::swap(dout, din);
  }
  return result;
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
                           const int32_t* labels, int64_t batch) {
  Forward(params, state, images, batch, /*training=*/false, 0, nullptr);
  return SoftmaxCrossEntropy(acts_.back(), labels, nullptr);
}

const Tensor& Model::Infer(const float* params, const float* state, const float* images,
                           int64_t batch) {
  Forward(params, state, images, batch, /*training=*/false, 0, nullptr);
  return acts_.back();
}

}  // namespace pstrain
