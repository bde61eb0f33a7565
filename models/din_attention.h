#ifndef PSTRAIN_MODELS_DIN_ATTENTION_H_
#define PSTRAIN_MODELS_DIN_ATTENTION_H_

#include <memory>
#include <string>
#include <vector>

#include "models/activation.h"
#include "models/dense.h"
#include "models/layer.h"

namespace pstrain {

struct DinAttentionOptions {
  int units = 36;  // the hidden layer of the unit
  // The hidden layer's activation: kRelu fused, or one of `activation`.
  Activation fused = Activation::kNone;
  bool has_activation = true;
  ActivationKind activation = ActivationKind::kSigmoid;
  InitializerSpec kernel_initializer = Initializer::kGlorotUniform;
};

// DIN's attention unit (Zhou et al. 2018, "Deep Interest Network"): input 0
// a history [L, d] (its mask leaves padding out), input 1 a candidate [d].
// Each valid position t scores its item against the candidate through a
// small MLP over [h_t, c, h_t - c, h_t * c] (4d -> units -> 1), and the
// output [d] is the history weighted by the scores, summed: sum_t a_t h_t (not
// normalized, as the paper's, so the weights keep the history's intensity).
// Variables: "hidden/kernel" [4d, units], "hidden/bias", "score/kernel"
// [units, 1], "score/bias".
class DinAttention : public MultiInputLayer {
 public:
  DinAttention(std::string name, const DinAttentionOptions& options);

  size_t MaxInputs() const override { return 2; }
  absl::StatusOr<Shape> BuildInputs(const std::vector<Shape>& inputs) override;
  std::vector<VariableSpec> Variables() const override;
  void BindOffsets(std::vector<int64_t> offsets) override;
  int64_t ForwardMultiplyAdds() const override;
  void ForwardInputs(const std::vector<const Tensor*>& in, Tensor* out,
                     const ForwardArgs& args) override;
  void BackwardInputs(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                      const std::vector<Tensor*>& din, const BackwardArgs& args) override;

 private:
  DinAttentionOptions options_;
  Dense hidden_;
  std::unique_ptr<ElementwiseActivation> activation_;  // null: none, or fused into hidden_
  Dense score_;
  int64_t length_ = 0, dim_ = 0;
  // The last forward pass: the unit's input per position, its hidden layer
  // before and after the activation, the scores (zero at padding), lengths.
  Tensor z_, hidden_out_, activated_, scores_;
  std::vector<int32_t> valid_;
  Tensor dscores_, dactivated_, dhidden_, dz_;  // backward scratch
};

}  // namespace pstrain

#endif  // PSTRAIN_MODELS_DIN_ATTENTION_H_
