#include "models/mmoe.h"

#include <algorithm>
#include <utility>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "models/gemm.h"
#include "models/parallel.h"

namespace pstrain {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajor>;

Eigen::Map<Eigen::ArrayXf> ArrayOf(float* p, int64_t n) { return {p, n}; }
Eigen::Map<const Eigen::ArrayXf> ArrayOf(const float* p, int64_t n) { return {p, n}; }

// out[j] = sum over `rows` rows of m[r * ld + j], j < cols: a bias's
// gradient, each column summed by one task in row order.
void ColumnSums(const float* m, int64_t rows, int64_t cols, int64_t ld, float* out) {
  ParallelFor(cols, 64, [&](int64_t begin, int64_t end) {
    auto sum = ArrayOf(out + begin, end - begin);
    sum.setZero();
    for (int64_t r = 0; r < rows; ++r) sum += ArrayOf(m + r * ld + begin, end - begin);
  });
}

}  // namespace

Mmoe::Mmoe(std::string name, const MmoeOptions& options)
    : Layer(std::move(name)), options_(options) {}

absl::StatusOr<Shape> Mmoe::Build(const Shape& input) {
  if (options_.experts < 1 || options_.tasks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": mmoe needs experts >= 1 (got ",
                                                   options_.experts, ") and tasks >= 1 (got ",
                                                   options_.tasks, ")"));
  }
  if (options_.units.empty() ||
      std::any_of(options_.units.begin(), options_.units.end(), [](int u) { return u < 1; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": mmoe's units are each expert's layers: a non-empty list of whole numbers >= 1"));
  }
  if (input.size() != 1 || input[0] < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": mmoe takes a flat input [d] (add a flatten layer), got ", ShapeToString(input)));
  }
  in_features_ = input[0];
  out_units_ = options_.units.back();
  hidden_.resize(options_.units.size());
  return Shape{options_.tasks * out_units_};
}

std::vector<VariableSpec> Mmoe::Variables() const {
  std::vector<VariableSpec> vars;
  for (int e = 0; e < options_.experts; ++e) {
    int64_t in = in_features_;
    for (size_t k = 0; k < options_.units.size(); ++k) {
      const int64_t units = options_.units[k];
      vars.push_back({absl::StrCat("expert", e, "/kernel", k),
                      {in, units},
                      true,
                      options_.kernel_initializer,
                      in,
                      units});
      vars.push_back({absl::StrCat("expert", e, "/bias", k), {units}, true, Initializer::kZeros});
      in = units;
    }
  }
  const int64_t experts = options_.experts;
  for (int t = 0; t < options_.tasks; ++t) {
    vars.push_back({absl::StrCat("gate", t, "/kernel"),
                    {in_features_, experts},
                    true,
                    options_.kernel_initializer,
                    in_features_,
                    experts});
    vars.push_back({absl::StrCat("gate", t, "/bias"), {experts}, true, Initializer::kZeros});
  }
  return vars;
}

int64_t Mmoe::ForwardMultiplyAdds() const {
  int64_t expert = 0, in = in_features_;
  for (int units : options_.units) {
    expert += in * units;
    in = units;
  }
  const int64_t experts = options_.experts, tasks = options_.tasks;
  return experts * expert + tasks * in_features_ * experts + tasks * experts * out_units_;
}

void Mmoe::Forward(const Tensor& in, Tensor* out, const ForwardArgs& args) {
  const int64_t batch = in.dim(0), d = in_features_;
  const int64_t experts = options_.experts, tasks = options_.tasks, u = out_units_;
  // The experts, layer by layer: each expert's GEMM into its columns.
  for (size_t k = 0; k < options_.units.size(); ++k) {
    const int64_t units = options_.units[k], width = Width(k);
    const int64_t in_units = k == 0 ? d : options_.units[k - 1];
    const int64_t in_width = k == 0 ? d : Width(k - 1);
    Tensor& h = hidden_[k];
    h.Resize({batch, width});
    for (int e = 0; e < options_.experts; ++e) {
      const float* x = k == 0 ? in.data() : hidden_[k - 1].data() + e * in_units;
      ParallelGemm(false, false, batch, units, in_units, x, in_width,
                   args.params + offset(ExpertKernel(e, k)), units, false, h.data() + e * units,
                   width);
    }
    ParallelFor(batch, 16, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        for (int e = 0; e < options_.experts; ++e) {
          auto y = ArrayOf(h.data() + n * width + e * units, units);
          y = (y + ArrayOf(args.params + offset(ExpertKernel(e, k) + 1), units)).max(0.0f);
        }
      }
    });
  }
  // The gates: softmax(x W_t + b_t), task t's at columns [t * experts, ...).
  const int64_t gate_width = tasks * experts;
  gates_.Resize({batch, gate_width});
  for (int t = 0; t < options_.tasks; ++t) {
    ParallelGemm(false, false, batch, experts, d, in.data(), d, args.params + offset(GateKernel(t)),
                 experts, false, gates_.data() + t * experts, gate_width);
  }
  // Per example: out [tasks, u] = gates [tasks, experts] * last [experts, u].
  const Tensor& last = hidden_.back();
  out->Resize({batch, tasks * u});
  ParallelFor(batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      float* g = gates_.data() + n * gate_width;
      for (int t = 0; t < options_.tasks; ++t) {
        auto z = ArrayOf(g + t * experts, experts);
        z += ArrayOf(args.params + offset(GateKernel(t) + 1), experts);
        z = (z - z.maxCoeff()).exp();
        z /= z.sum();
      }
      MatrixMap(out->data() + n * tasks * u, tasks, u).noalias() =
          ConstMatrixMap(g, tasks, experts) *
          ConstMatrixMap(last.data() + n * experts * u, experts, u);
    }
  });
}

void Mmoe::Backward(const Tensor& in, const Tensor&, const Tensor& dout, Tensor* din,
                    const BackwardArgs& args) {
  const int64_t batch = in.dim(0), d = in_features_;
  const int64_t experts = options_.experts, tasks = options_.tasks, u = out_units_;
  const int64_t gate_width = tasks * experts;
  const size_t layers = options_.units.size();
  // Per example: d(last) = gates^T d(out), d(gates) = d(out) last^T, then
  // through the softmax: dz = g * (dg - sum(g * dg)).
  const Tensor& last = hidden_.back();
  dhidden_.Resize({batch, experts * u});
  dgates_.Resize({batch, gate_width});
  ParallelFor(batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const ConstMatrixMap dy(dout.data() + n * tasks * u, tasks, u);
      const ConstMatrixMap g(gates_.data() + n * gate_width, tasks, experts);
      MatrixMap(dhidden_.data() + n * experts * u, experts, u).noalias() = g.transpose() * dy;
      MatrixMap dg(dgates_.data() + n * gate_width, tasks, experts);
      dg.noalias() = dy * ConstMatrixMap(last.data() + n * experts * u, experts, u).transpose();
      for (int t = 0; t < options_.tasks; ++t) {
        auto p = ArrayOf(gates_.data() + n * gate_width + t * experts, experts);
        auto dz = ArrayOf(dgates_.data() + n * gate_width + t * experts, experts);
        dz = p * (dz - (p * dz).sum());
      }
    }
  });
  // The gates' variables, and the input's gradient through them.
  for (int t = 0; t < options_.tasks; ++t) {
    const float* dz = dgates_.data() + t * experts;
    ParallelGemm(true, false, d, experts, batch, in.data(), d, dz, gate_width, false,
                 args.grads + offset(GateKernel(t)), experts);
    ColumnSums(dz, batch, experts, gate_width, args.grads + offset(GateKernel(t) + 1));
    if (din != nullptr) {
      if (t == 0) din->Resize(in.shape());
      ParallelGemm(false, true, batch, d, experts, dz, gate_width,
                   args.params + offset(GateKernel(t)), experts, t > 0, din->data(), d);
    }
  }
  // The experts, last layer first: through the ReLU, then each expert's
  // kernel and bias, then the layer's input (the input's gradient adds up
  // every expert's).
  for (size_t k = layers; k-- > 0;) {
    const int64_t units = options_.units[k], width = Width(k);
    const int64_t in_units = k == 0 ? d : options_.units[k - 1];
    const int64_t in_width = k == 0 ? d : Width(k - 1);
    const Tensor& h = hidden_[k];
    ParallelFor(batch * width, 1 << 14, [&](int64_t begin, int64_t end) {
      auto dz = ArrayOf(dhidden_.data() + begin, end - begin);
      dz = (ArrayOf(h.data() + begin, end - begin) > 0.0f).select(dz, 0.0f);
    });
    if (k > 0) dprevious_.Resize({batch, in_width});
    for (int e = 0; e < options_.experts; ++e) {
      const float* dz = dhidden_.data() + e * units;
      const float* x = k == 0 ? in.data() : hidden_[k - 1].data() + e * in_units;
      ParallelGemm(true, false, in_units, units, batch, x, in_width, dz, width, false,
                   args.grads + offset(ExpertKernel(e, k)), units);
      ColumnSums(dz, batch, units, width, args.grads + offset(ExpertKernel(e, k) + 1));
      const float* kernel = args.params + offset(ExpertKernel(e, k));
      if (k > 0) {
        ParallelGemm(false, true, batch, in_units, units, dz, width, kernel, units, false,
                     dprevious_.data() + e * in_units, in_width);
      } else if (din != nullptr) {
        ParallelGemm(false, true, batch, d, units, dz, width, kernel, units, true, din->data(), d);
      }
    }
    if (k > 0) std::swap(dhidden_, dprevious_);
  }
}

}  // namespace pstrain
