#include "models/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "models/gemm.h"
#include "models/parallel.h"
#include "models/random.h"

namespace pstrain {
namespace {

// The offsets' order in Variables().
enum : int {
  kQueryKernel,
  kQueryBias,
  kKeyKernel,
  kKeyBias,
  kValueKernel,
  kValueBias,
  kOutKernel,
  kOutBias
};

// y[r, :] += bias for every row.
void AddBias(const float* bias, int64_t rows, int64_t cols, float* y) {
  ParallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* row = y + r * cols;
      for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
    }
  });
}

// sums[j] = sum over rows of m[r, j].
void ColumnSums(const float* m, int64_t rows, int64_t cols, float* sums) {
  ParallelFor(cols, 64, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) sums[j] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = m + r * cols;
      for (int64_t j = begin; j < end; ++j) sums[j] += row[j];
    }
  });
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(std::string name, const MultiHeadAttentionOptions& options)
    : MultiInputLayer(std::move(name)), options_(options) {}

absl::StatusOr<Shape> MultiHeadAttention::BuildInputs(const std::vector<Shape>& inputs) {
  if (options_.heads <= 0 || options_.key_dim <= 0 || options_.value_dim < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": multi_head_attention needs heads and key_dim >= 1, got heads ",
                     options_.heads, " and key_dim ", options_.key_dim));
  }
  if (!(options_.dropout >= 0.0f && options_.dropout < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": dropout must be in [0, 1), got ", options_.dropout));
  }
  const Shape& keys = inputs[0];
  if (keys.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": attention attends over a sequence [L, d], got ", ShapeToString(keys)));
  }
  const Shape& query = inputs.size() > 1 ? inputs[1] : inputs[0];
  if (query.empty() || query.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": the query is [L, d] or [d], got ", ShapeToString(query)));
  }
  value_dim_ = options_.value_dim > 0 ? options_.value_dim : options_.key_dim;
  k_len_ = keys[0];
  k_dim_ = keys[1];
  q_len_ = query.size() == 2 ? query[0] : 1;
  q_dim_ = query.back();
  if (options_.causal && q_len_ != k_len_) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": causal attention needs queries and keys of one length, got ",
                     q_len_, " and ", k_len_));
  }
  return query;
}

int MultiHeadAttention::MaskFrom(const std::vector<Shape>& inputs, const Shape& /*output*/) const {
  const size_t query = inputs.size() - 1;
  return inputs[query].size() == 2 ? static_cast<int>(query) : -1;
}

std::vector<VariableSpec> MultiHeadAttention::Variables() const {
  auto kernel = [&](const char* name, int64_t in, int64_t out) {
    return VariableSpec{name, {in, out}, true, options_.kernel_initializer, in, out};
  };
  auto bias = [](const char* name, int64_t n) {
    return VariableSpec{name, {n}, true, Initializer::kZeros};
  };
  return {kernel("query/kernel", q_dim_, qk()),  bias("query/bias", qk()),
          kernel("key/kernel", k_dim_, qk()),    bias("key/bias", qk()),
          kernel("value/kernel", k_dim_, vo()),  bias("value/bias", vo()),
          kernel("output/kernel", vo(), q_dim_), bias("output/bias", q_dim_)};
}

int64_t MultiHeadAttention::ForwardMultiplyAdds() const {
  return q_len_ * q_dim_ * qk() + k_len_ * k_dim_ * (qk() + vo()) +
         q_len_ * k_len_ * (qk() + vo()) + q_len_ * vo() * q_dim_;
}

int64_t MultiHeadAttention::KeysOf(const int32_t* key_lengths, int64_t b, int64_t i) const {
  int64_t n = key_lengths != nullptr ? std::clamp<int64_t>(key_lengths[b], 0, k_len_) : k_len_;
  if (options_.causal) n = std::min(n, i + 1);
  return n;
}

void MultiHeadAttention::ForwardInputs(const std::vector<const Tensor*>& in, Tensor* out,
                                       const ForwardArgs& args) {
  const Tensor& xk = *in[0];
  const Tensor& xq = in.size() > 1 ? *in[1] : xk;
  const int64_t batch = xk.dim(0);
  const int64_t heads = options_.heads, kd = options_.key_dim, vd = value_dim_;
  const int64_t rq = batch * q_len_, rk = batch * k_len_;
  const float* params = args.params;
  q_.Resize({rq, qk()});
  k_.Resize({rk, qk()});
  v_.Resize({rk, vo()});
  ParallelGemm(false, false, rq, qk(), q_dim_, xq.data(), q_dim_, params + offset(kQueryKernel),
               qk(), false, q_.data(), qk());
  AddBias(params + offset(kQueryBias), rq, qk(), q_.data());
  ParallelGemm(false, false, rk, qk(), k_dim_, xk.data(), k_dim_, params + offset(kKeyKernel), qk(),
               false, k_.data(), qk());
  AddBias(params + offset(kKeyBias), rk, qk(), k_.data());
  ParallelGemm(false, false, rk, vo(), k_dim_, xk.data(), k_dim_, params + offset(kValueKernel),
               vo(), false, v_.data(), vo());
  AddBias(params + offset(kValueBias), rk, vo(), v_.data());

  const int32_t* lengths = args.length_of(0);
  key_lengths_.assign(batch, static_cast<int32_t>(k_len_));
  if (lengths != nullptr) std::copy(lengths, lengths + batch, key_lengths_.begin());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kd));
  const int64_t block = q_len_ * k_len_;
  dropped_ = args.training && options_.dropout > 0.0f;
  p_.Resize({batch * heads, q_len_, k_len_});
  if (dropped_) drop_.Resize(p_.shape());
  o_.Resize({rq, vo()});
  const float keep_scale = 1.0f / (1.0f - options_.dropout);
  const uint32_t threshold =
      static_cast<uint32_t>(static_cast<double>(options_.dropout) * (1u << 24));
  ParallelFor(batch * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      float* s = p_.data() + bh * block;
      Gemm(false, true, q_len_, k_len_, kd, q_.data() + b * q_len_ * qk() + h * kd, qk(),
           k_.data() + b * k_len_ * qk() + h * kd, qk(), false, s, k_len_);
      for (int64_t i = 0; i < q_len_; ++i) {
        float* row = s + i * k_len_;
        const int64_t n = KeysOf(key_lengths_.data(), b, i);
        if (n > 0) {
          // Eigen's exp is vectorized (the scalar one would take most of the pass).
          Eigen::Map<Eigen::ArrayXf> r(row, n);
          r *= scale;
          r = (r - r.maxCoeff()).exp();
          r *= 1.0f / r.sum();
        }
        std::fill(row + n, row + k_len_, 0.0f);
      }
      const float* weights = s;
      if (dropped_) {
        float* d = drop_.data() + bh * block;
        SplitMix64 rng(MixSeeds(args.seed, static_cast<uint64_t>(bh)));
        for (int64_t j = 0; j < block; j += 2) {
          const uint64_t bits = rng.Next();
          for (int64_t t = 0; t < 2 && j + t < block; ++t) {
            const uint32_t u = static_cast<uint32_t>(bits >> (t * 32 + 8)) & 0xFFFFFF;
            d[j + t] = u >= threshold ? s[j + t] * keep_scale : 0.0f;
          }
        }
        weights = d;
      }
      Gemm(false, false, q_len_, vd, k_len_, weights, k_len_,
           v_.data() + b * k_len_ * vo() + h * vd, vo(), false,
           o_.data() + b * q_len_ * vo() + h * vd, vo());
    }
  });
  out->Resize(xq.shape());
  ParallelGemm(false, false, rq, q_dim_, vo(), o_.data(), vo(), params + offset(kOutKernel), q_dim_,
               false, out->data(), q_dim_);
  AddBias(params + offset(kOutBias), rq, q_dim_, out->data());
}

void MultiHeadAttention::BackwardInputs(const std::vector<const Tensor*>& in, const Tensor& /*out*/,
                                        const Tensor& dout, const std::vector<Tensor*>& din,
                                        const BackwardArgs& args) {
  const Tensor& xk = *in[0];
  const Tensor& xq = in.size() > 1 ? *in[1] : xk;
  const int64_t batch = xk.dim(0);
  const int64_t heads = options_.heads, kd = options_.key_dim, vd = value_dim_;
  const int64_t rq = batch * q_len_, rk = batch * k_len_;
  const float* params = args.params;
  float* grads = args.grads;
  // The output projection.
  ParallelGemm(true, false, vo(), q_dim_, rq, o_.data(), vo(), dout.data(), q_dim_, false,
               grads + offset(kOutKernel), q_dim_);
  ColumnSums(dout.data(), rq, q_dim_, grads + offset(kOutBias));
  do_.Resize({rq, vo()});
  ParallelGemm(false, true, rq, vo(), q_dim_, dout.data(), q_dim_, params + offset(kOutKernel),
               q_dim_, false, do_.data(), vo());
  // The heads: with Pd the weights after dropout (P without it),
  // dS = Pd .* dPd - P .* rowsum(Pd .* dPd), scaled.
  dq_.Resize({rq, qk()});
  dk_.Resize({rk, qk()});
  dv_.Resize({rk, vo()});
  const float scale = 1.0f / std::sqrt(static_cast<float>(kd));
  const int64_t block = q_len_ * k_len_;
  ParallelFor(batch * heads, 4, [&](int64_t begin, int64_t end) {
    // Aligned as a Tensor is: Eigen's sum below starts its packets at the
    // first aligned float, so on plain (16-byte) heap memory the order of
    // its additions, and the gradient's last bits, changed from run to run.
    std::vector<float, Eigen::aligned_allocator<float>> ds(block);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / heads, h = bh % heads;
      const float* p = p_.data() + bh * block;
      const float* pd = dropped_ ? drop_.data() + bh * block : p;
      const float* dob = do_.data() + b * q_len_ * vo() + h * vd;
      Gemm(false, true, q_len_, k_len_, vd, dob, vo(), v_.data() + b * k_len_ * vo() + h * vd, vo(),
           false, ds.data(), k_len_);
      Gemm(true, false, k_len_, vd, q_len_, pd, k_len_, dob, vo(), false,
           dv_.data() + b * k_len_ * vo() + h * vd, vo());
      for (int64_t i = 0; i < q_len_; ++i) {
        float* row = ds.data() + i * k_len_;
        const float* pr = p + i * k_len_;
        const float* pdr = pd + i * k_len_;
        Eigen::Map<Eigen::ArrayXf> r(row, k_len_);
        r *= Eigen::Map<const Eigen::ArrayXf>(pdr, k_len_);
        const float t = r.sum();
        r = (r - Eigen::Map<const Eigen::ArrayXf>(pr, k_len_) * t) * scale;
      }
      Gemm(false, false, q_len_, kd, k_len_, ds.data(), k_len_,
           k_.data() + b * k_len_ * qk() + h * kd, qk(), false,
           dq_.data() + b * q_len_ * qk() + h * kd, qk());
      Gemm(true, false, k_len_, kd, q_len_, ds.data(), k_len_,
           q_.data() + b * q_len_ * qk() + h * kd, qk(), false,
           dk_.data() + b * k_len_ * qk() + h * kd, qk());
    }
  });
  // The input projections.
  ParallelGemm(true, false, q_dim_, qk(), rq, xq.data(), q_dim_, dq_.data(), qk(), false,
               grads + offset(kQueryKernel), qk());
  ColumnSums(dq_.data(), rq, qk(), grads + offset(kQueryBias));
  ParallelGemm(true, false, k_dim_, qk(), rk, xk.data(), k_dim_, dk_.data(), qk(), false,
               grads + offset(kKeyKernel), qk());
  ColumnSums(dk_.data(), rk, qk(), grads + offset(kKeyBias));
  ParallelGemm(true, false, k_dim_, vo(), rk, xk.data(), k_dim_, dv_.data(), vo(), false,
               grads + offset(kValueKernel), vo());
  ColumnSums(dv_.data(), rk, vo(), grads + offset(kValueBias));
  // dL/d(keys' input) = dK Wk^T + dV Wv^T; the query's dQ Wq^T, added to it
  // in self-attention.
  Tensor* dkeys = din[0];
  if (dkeys != nullptr) {
    dkeys->Resize(xk.shape());
    ParallelGemm(false, true, rk, k_dim_, qk(), dk_.data(), qk(), params + offset(kKeyKernel), qk(),
                 false, dkeys->data(), k_dim_);
    ParallelGemm(false, true, rk, k_dim_, vo(), dv_.data(), vo(), params + offset(kValueKernel),
                 vo(), true, dkeys->data(), k_dim_);
  }
  Tensor* dquery = in.size() > 1 ? din[1] : dkeys;
  if (dquery != nullptr) {
    if (in.size() > 1) dquery->Resize(xq.shape());
    ParallelGemm(false, true, rq, q_dim_, qk(), dq_.data(), qk(), params + offset(kQueryKernel),
                 qk(), in.size() == 1, dquery->data(), q_dim_);
  }
}

}  // namespace pstrain
