#include "models/din_attention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/parallel.h"

namespace pstrain {
namespace {

DenseOptions HiddenOptions(const DinAttentionOptions& o) {
  DenseOptions d;
  d.units = o.units;
  d.activation = o.fused;
  d.kernel_initializer = o.kernel_initializer;
  return d;
}

DenseOptions ScoreOptions(const DinAttentionOptions& o) {
  DenseOptions d;
  d.units = 1;
  d.kernel_initializer = o.kernel_initializer;
  return d;
}

}  // namespace

DinAttention::DinAttention(std::string name, const DinAttentionOptions& options)
    : MultiInputLayer(name),
      options_(options),
      hidden_(name + "/hidden", HiddenOptions(options)),
      score_(name + "/score", ScoreOptions(options)) {
  if (options.fused == Activation::kNone && options.has_activation) {
    activation_ = std::make_unique<ElementwiseActivation>(name + "/activation", options.activation);
  }
}

absl::StatusOr<Shape> DinAttention::BuildInputs(const std::vector<Shape>& inputs) {
  if (inputs.size() != 2 || inputs[0].size() != 2 || inputs[1].size() != 1 ||
      inputs[0][1] != inputs[1][0]) {
    std::vector<std::string> got;
    for (const Shape& s : inputs) got.push_back(ShapeToString(s));
    return absl::InvalidArgumentError(absl::StrCat(
        name(),
        ": din_attention takes a history [L, d] (its input) and a candidate [d] (query: "
        "<layer>), got ",
        absl::StrJoin(got, " and ")));
  }
  if (options_.units <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": units must be positive"));
  }
  length_ = inputs[0][0];
  dim_ = inputs[0][1];
  absl::StatusOr<Shape> hidden = hidden_.Build({4 * dim_});
  if (!hidden.ok()) return hidden.status();
  absl::StatusOr<Shape> score = score_.Build(*hidden);
  if (!score.ok()) return score.status();
  return Shape{dim_};
}

std::vector<VariableSpec> DinAttention::Variables() const {
  std::vector<VariableSpec> vars;
  for (VariableSpec v : hidden_.Variables()) {
    v.name = "hidden/" + v.name;
    vars.push_back(std::move(v));
  }
  for (VariableSpec v : score_.Variables()) {
    v.name = "score/" + v.name;
    vars.push_back(std::move(v));
  }
  return vars;
}

void DinAttention::BindOffsets(std::vector<int64_t> offsets) {
  const size_t hidden = hidden_.Variables().size();
  hidden_.BindOffsets(std::vector<int64_t>(offsets.begin(), offsets.begin() + hidden));
  score_.BindOffsets(std::vector<int64_t>(offsets.begin() + hidden, offsets.end()));
  Layer::BindOffsets(std::move(offsets));
}

int64_t DinAttention::ForwardMultiplyAdds() const {
  return length_ * (4 * dim_ * options_.units + options_.units + dim_);
}

void DinAttention::ForwardInputs(const std::vector<const Tensor*>& in, Tensor* out,
                                 const ForwardArgs& args) {
  const Tensor& history = *in[0];
  const Tensor& candidate = *in[1];
  const int64_t batch = history.dim(0);
  const int64_t d = dim_;
  const int32_t* lengths = args.length_of(0);
  valid_.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    valid_[b] = static_cast<int32_t>(
        lengths != nullptr ? std::clamp<int64_t>(lengths[b], 0, length_) : length_);
  }
  // The unit's input, [h, c, h - c, h * c] per position.
  z_.Resize({batch * length_, 4 * d});
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* c = candidate.data() + b * d;
      for (int64_t t = 0; t < length_; ++t) {
        const float* h = history.data() + (b * length_ + t) * d;
        float* z = z_.data() + (b * length_ + t) * 4 * d;
        for (int64_t j = 0; j < d; ++j) {
          z[j] = h[j];
          z[d + j] = c[j];
          z[2 * d + j] = h[j] - c[j];
          z[3 * d + j] = h[j] * c[j];
        }
      }
    }
  });
  ForwardArgs inner = args;
  inner.lengths.clear();
  hidden_.Forward(z_, &hidden_out_, inner);
  const Tensor* activated = &hidden_out_;
  if (activation_ != nullptr) {
    activation_->Forward(hidden_out_, &activated_, inner);
    activated = &activated_;
  }
  score_.Forward(*activated, &scores_, inner);
  out->Resize({batch, d});
  out->SetZero();
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* y = out->data() + b * d;
      for (int64_t t = 0; t < length_; ++t) {
        float& a = scores_[b * length_ + t];
        if (t >= valid_[b]) {
          a = 0.0f;  // padding weighs nothing
          continue;
        }
        const float* h = history.data() + (b * length_ + t) * d;
        for (int64_t j = 0; j < d; ++j) y[j] += a * h[j];
      }
    }
  });
}

void DinAttention::BackwardInputs(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                                  const Tensor& dout, const std::vector<Tensor*>& din,
                                  const BackwardArgs& args) {
  const Tensor& history = *in[0];
  const Tensor& candidate = *in[1];
  const int64_t batch = history.dim(0);
  const int64_t d = dim_;
  // d(out)/d(score_t) = h_t; zero at padding, where the score was set.
  dscores_.Resize({batch * length_, 1});
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* g = dout.data() + b * d;
      for (int64_t t = 0; t < length_; ++t) {
        float sum = 0.0f;
        if (t < valid_[b]) {
          const float* h = history.data() + (b * length_ + t) * d;
          for (int64_t j = 0; j < d; ++j) sum += g[j] * h[j];
        }
        dscores_[b * length_ + t] = sum;
      }
    }
  });
  BackwardArgs inner = args;
  inner.lengths.clear();
  const Tensor* activated = activation_ != nullptr ? &activated_ : &hidden_out_;
  score_.Backward(*activated, scores_, dscores_, &dactivated_, inner);
  const Tensor* dhidden = &dactivated_;
  if (activation_ != nullptr) {
    activation_->Backward(hidden_out_, activated_, dactivated_, &dhidden_, inner);
    dhidden = &dhidden_;
  }
  hidden_.Backward(z_, hidden_out_, *dhidden, &dz_, inner);
  Tensor* dhistory = din[0];
  Tensor* dcandidate = din.size() > 1 ? din[1] : nullptr;
  if (dhistory != nullptr) dhistory->Resize(history.shape());
  if (dcandidate != nullptr) {
    dcandidate->Resize(candidate.shape());
    dcandidate->SetZero();
  }
  ParallelFor(batch, 8, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* c = candidate.data() + b * d;
      const float* g = dout.data() + b * d;
      float* dc = dcandidate != nullptr ? dcandidate->data() + b * d : nullptr;
      for (int64_t t = 0; t < length_; ++t) {
        const int64_t row = b * length_ + t;
        const float* h = history.data() + row * d;
        const float* dz = dz_.data() + row * 4 * d;
        const float a = scores_[row];
        if (dhistory != nullptr) {
          float* dh = dhistory->data() + row * d;
          for (int64_t j = 0; j < d; ++j) {
            dh[j] = a * g[j] + dz[j] + dz[2 * d + j] + dz[3 * d + j] * c[j];
          }
        }
        if (dc != nullptr) {
          for (int64_t j = 0; j < d; ++j) {
            dc[j] += dz[d + j] - dz[2 * d + j] + dz[3 * d + j] * h[j];
          }
        }
      }
    }
  });
}

}  // namespace pstrain
