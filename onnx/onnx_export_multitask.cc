// The multi-task layers in the ONNX export (onnx_export_internal.h): mmoe
// as its experts' Gemm and Relu nodes, its gates' Gemm and Softmax, and the
// mixture as one batched MatMul; slice as Slice.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "onnx/onnx_export_internal.h"

namespace pstrain {
namespace onnx_export_internal {
namespace {

std::string Out(const onnx::NodeProto* node) { return node->output(0); }

// x [N, in] times the variable <name>/kernel [in, units] plus <name>/bias,
// as dense's Gemm; the node named `node`.
absl::StatusOr<std::string> AddGemm(GraphBuilder& b, const std::string& x,
                                    const std::string& kernel, const std::string& bias, int64_t in,
                                    int64_t units, const std::string& node) {
  std::vector<std::string> inputs = {x};
  PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(kernel, {in, units}));
  PSTRAIN_ASSIGN_OR_RETURN(inputs.emplace_back(), b.Variable(bias, {units}));
  onnx::NodeProto* gemm = b.Node("Gemm", node, inputs);
  SetFloat(gemm, "alpha", 1.0f);
  SetFloat(gemm, "beta", 1.0f);
  SetInt(gemm, "transA", 0);
  SetInt(gemm, "transB", 0);
  return Out(gemm);
}

}  // namespace

absl::StatusOr<Activation> AddMmoe(GraphBuilder& b, const LayerSpec& l, const Activation& x) {
  if (x.shape.size() != 1) return LayerError(b, l, "takes an input that is not flat");
  if (l.expert_units.empty() || l.experts < 1 || l.tasks < 1) {
    return LayerError(b, l, "has no experts, tasks or units");
  }
  const int64_t d = x.shape[0], u = l.expert_units.back();
  const std::string axis_1 = b.Int64Constant("axis_1", {1});
  // Each expert [N, u], as [N, 1, u], stacked: [N, experts, u].
  std::vector<std::string> experts;
  for (int e = 0; e < l.experts; ++e) {
    const std::string p = absl::StrCat(l.name, "/expert", e);
    std::string h = x.tensor;
    int64_t in = d;
    for (size_t k = 0; k < l.expert_units.size(); ++k) {
      PSTRAIN_ASSIGN_OR_RETURN(
          h, AddGemm(b, h, absl::StrCat(p, "/kernel", k), absl::StrCat(p, "/bias", k), in,
                     l.expert_units[k], absl::StrCat(p, "/dense", k)));
      h = Out(b.Node("Relu", absl::StrCat(p, "/relu", k), {h}));
      in = l.expert_units[k];
    }
    experts.push_back(Out(b.Node("Unsqueeze", p + "/stacked", {h, axis_1})));
  }
  onnx::NodeProto* all_experts = b.Node("Concat", l.name + "/experts", experts);
  SetInt(all_experts, "axis", 1);
  // Each task's gate [N, experts], as [N, 1, experts], stacked: [N, tasks, experts].
  std::vector<std::string> gates;
  for (int t = 0; t < l.tasks; ++t) {
    const std::string p = absl::StrCat(l.name, "/gate", t);
    PSTRAIN_ASSIGN_OR_RETURN(
        const std::string logits,
        AddGemm(b, x.tensor, p + "/kernel", p + "/bias", d, l.experts, p + "/logits"));
    onnx::NodeProto* softmax = b.Node("Softmax", p, {logits});
    SetInt(softmax, "axis", 1);
    gates.push_back(Out(b.Node("Unsqueeze", p + "/stacked", {Out(softmax), axis_1})));
  }
  onnx::NodeProto* all_gates = b.Node("Concat", l.name + "/gates", gates);
  SetInt(all_gates, "axis", 1);
  // Per example [tasks, experts] x [experts, u]: every task's mixture, in
  // task order once flattened.
  const std::string mixed =
      Out(b.Node("MatMul", l.name + "/mixtures", {Out(all_gates), Out(all_experts)}));
  onnx::NodeProto* flat = b.Node("Flatten", l.name, {mixed});
  SetInt(flat, "axis", 1);
  return Activation{Out(flat), {l.tasks * u}};
}

absl::StatusOr<Activation> AddSlice(GraphBuilder& b, const LayerSpec& l, const Activation& x) {
  if (x.shape.size() != 1 || l.begin < 0 || l.size < 1 || l.begin + int64_t{l.size} > x.shape[0]) {
    return LayerError(b, l, "takes a range that is not inside its flat input");
  }
  const int64_t end = l.begin + int64_t{l.size};
  onnx::NodeProto* slice =
      b.Node("Slice", l.name,
             {x.tensor, b.Int64Constant(absl::StrCat("int64_", l.begin), {l.begin}),
              b.Int64Constant(absl::StrCat("int64_", end), {end}), b.Int64Constant("axis_1", {1})});
  return Activation{Out(slice), {l.size}};
}

}  // namespace onnx_export_internal
}  // namespace pstrain
