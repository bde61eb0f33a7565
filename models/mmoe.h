#ifndef PSTRAIN_MODELS_MMOE_H_
#define PSTRAIN_MODELS_MMOE_H_

#include <string>
#include <vector>

#include "models/layer.h"

namespace pstrain {

struct MmoeOptions {
  int experts = 0;
  int tasks = 0;
  std::vector<int> units;  // each expert's dense layers, a ReLU after each
  InitializerSpec kernel_initializer = Initializer::kGlorotUniform;
};

// Multi-gate mixture of experts (Ma et al., KDD 2018, "Modeling Task
// Relationships in Multi-task Learning with Multi-gate Mixture-of-Experts")
// on a flat input x [d]: `experts` MLPs f_e, each dense layers of `units`
// with a ReLU after every one, shared by the tasks, and per task t a gate
// g_t = softmax(x W_t + b_t) over the experts. Task t's output is
// sum_e g_t[e] f_e(x), [u] with u the last units; the layer's output is
// every task's in order, [tasks * u], task t's at [t * u, (t + 1) * u).
//
// Variables, in order: per expert e and layer k, "expert<e>/kernel<k>"
// [in, units[k]] (in: d for k = 0, else units[k - 1]) and
// "expert<e>/bias<k>" [units[k]]; then per task "gate<t>/kernel" [d,
// experts] and "gate<t>/bias" [experts]. Kernels glorot_uniform (or
// `kernel_initializer`), biases zero, as Dense's.
//
// Each expert layer is one GEMM over the batch per expert, all experts'
// outputs side by side in one [batch, experts * units[k]] buffer; the
// experts' variables stay apart so that each is named as its own (one GEMM
// for every expert's first layer would need one kernel [d, experts *
// units[0]] holding them all).
class Mmoe : public Layer {
 public:
  Mmoe(std::string name, const MmoeOptions& options);

  // InvalidArgument naming the layer for experts or tasks < 1, no units or
  // a unit < 1, or an input that is not flat.
  absl::StatusOr<Shape> Build(const Shape& input) override;
  std::vector<VariableSpec> Variables() const override;
  int64_t ForwardMultiplyAdds() const override;
  void Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) override;
  void Backward(const Tensor& in, const Tensor& out, const Tensor& dout, Tensor* din,
                const BackwardArgs& args) override;

 private:
  int64_t Width(size_t k) const { return int64_t{options_.experts} * options_.units[k]; }
  // The index in Variables() of expert e's kernel of layer k (its bias is
  // the next), and of gate t's kernel (its bias the next).
  int ExpertKernel(int e, size_t k) const {
    return 2 * (e * static_cast<int>(options_.units.size()) + static_cast<int>(k));
  }
  int GateKernel(int t) const {
    return 2 * (options_.experts * static_cast<int>(options_.units.size()) + t);
  }

  MmoeOptions options_;
  int64_t in_features_ = 0;
  int64_t out_units_ = 0;  // units.back()
  // The last forward pass: per expert layer its outputs after the ReLU,
  // [batch, experts * units[k]] (expert e's at columns [e * units[k], ...));
  // the gates' softmax, [batch, tasks * experts].
  std::vector<Tensor> hidden_;
  Tensor gates_;
  Tensor dhidden_, dprevious_, dgates_;  // backward scratch
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_MMOE_H_
