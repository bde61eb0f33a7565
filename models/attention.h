#ifndef PSTRAIN_MODELS_ATTENTION_H_
#define PSTRAIN_MODELS_ATTENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "models/layer.h"

namespace pstrain {

struct MultiHeadAttentionOptions {
  int heads = 0;
  int key_dim = 0;       // per head, of queries and keys
  int value_dim = 0;     // per head; 0: key_dim
  float dropout = 0.0f;  // on the attention weights, in training
  bool causal = false;   // a query attends only to keys at or before its position
  InitializerSpec kernel_initializer = Initializer::kGlorotUniform;
};

// Multi-head scaled dot-product attention (Vaswani et al. 2017), as Keras'
// MultiHeadAttention and torch.nn.MultiheadAttention. Input 0 is the
// sequence attended over, [Lk, dk] (its keys and values); input 1, if given,
// the query, [Lq, dq] or [dq] (target attention: a candidate against a
// history), else input 0 is the query too (self-attention). Output: the
// query's shape. Per head h:
//   Q_h = x_q Wq_h + bq_h,  K_h = x_k Wk_h + bk_h,  V_h = x_k Wv_h + bv_h
//   O_h = softmax(Q_h K_h^T / sqrt(key_dim) + mask) V_h
//   y = [O_1 .. O_heads] Wo + bo
// Variables: "query/kernel" [dq, heads x key_dim], "key/kernel" [dk, heads x
// key_dim], "value/kernel" [dk, heads x value_dim], "output/kernel" [heads x
// value_dim, dq], each with its bias. Keys past a sequence's length (its
// mask) and, when causal, after the query's position get no weight; a query
// with no key to attend to gets no value: its output is the output bias bo.
class MultiHeadAttention : public MultiInputLayer {
 public:
  MultiHeadAttention(std::string name, const MultiHeadAttentionOptions& options);

  size_t MaxInputs() const override { return 2; }
  absl::StatusOr<Shape> BuildInputs(const std::vector<Shape>& inputs) override;
  int MaskFrom(const std::vector<Shape>& inputs, const Shape& output) const override;
  std::vector<VariableSpec> Variables() const override;
  int64_t ForwardMultiplyAdds() const override;
  void ForwardInputs(const std::vector<const Tensor*>& in, Tensor* out,
                     const ForwardArgs& args) override;
  void BackwardInputs(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                      const std::vector<Tensor*>& din, const BackwardArgs& args) override;

 private:
  int64_t qk() const { return int64_t{options_.heads} * options_.key_dim; }
  int64_t vo() const { return int64_t{options_.heads} * value_dim_; }
  // The keys query i of example b may attend to: [0, KeysOf(b, i)).
  int64_t KeysOf(const int32_t* key_lengths, int64_t b, int64_t i) const;

  MultiHeadAttentionOptions options_;
  int value_dim_ = 0;
  int64_t q_len_ = 0, k_len_ = 0;  // per example
  int64_t q_dim_ = 0, k_dim_ = 0;
  // The last forward pass: projections, attention weights (before dropout)
  // and the dropout's multipliers, the heads' outputs, the keys' lengths.
  Tensor q_, k_, v_, o_, p_, drop_;
  std::vector<int32_t> key_lengths_;
  bool dropped_ = false;
  Tensor dq_, dk_, dv_, do_, ds_, dx_;  // backward scratch
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_ATTENTION_H_
