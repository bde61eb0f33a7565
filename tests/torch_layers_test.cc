// pstrain's layers against PyTorch's (issue 42): the same inputs and
// weights through both, forward and backward (python3-torch runs
// tests/torch/layer_reference.py), equal to 1e-5. Skipped, loudly, where
// PyTorch is missing (a failure under tests/run.sh, which installs it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "models/activation.h"
#include "models/attention.h"
#include "models/layer_norm.h"
#include "models/mmoe.h"
#include "models/tensor.h"
#include "tests/test_cluster_util.h"

namespace pstrain {
namespace {

using testing_util::ProcessResult;
using testing_util::RunProcess;

const std::string kSource = PSTRAIN_SOURCE_DIR;
const std::string kPython = "/usr/bin/python3";

void WriteFloats(const std::string& path, const std::vector<float>& v) {
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, bytes).ok()) << path;
}

std::vector<float> ReadFloats(const std::string& path) {
  absl::StatusOr<std::string> bytes = Env::Default()->ReadFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<float> v(bytes->size() / sizeof(float));
  std::memcpy(v.data(), bytes->data(), v.size() * sizeof(float));
  return v;
}

std::vector<float> Random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The largest |a - b|; a size mismatch is a failure.
double MaxDifference(const std::vector<float>& a, const float* b, size_t n) {
  EXPECT_EQ(a.size(), n);
  double most = 0;
  for (size_t i = 0; i < std::min(a.size(), n); ++i)
    most = std::max(most, std::fabs(double(a[i]) - b[i]));
  return most;
}

class TorchLayersTest : public testing_util::ClusterTestBase {
 protected:
  TorchLayersTest() : ClusterTestBase("torch_layers") {}

  void SetUp() override {
    ClusterTestBase::SetUp();
    if (RunProcess({kPython, "-c", "import torch, numpy"}, 60).exit_code != 0) {
      const char* required = std::getenv("PSTRAIN_REQUIRE_ONNX_TOOLS");
      if (required != nullptr && std::string(required) == "1") {
        FAIL() << "no PyTorch for " << kPython << " (PSTRAIN_REQUIRE_ONNX_TOOLS=1)";
      }
      GTEST_SKIP() << "SKIPPED: no PyTorch for " << kPython
                   << " (Debian's python3-torch; deploy/install-deps.sh installs it)";
    }
  }

  // PyTorch's run of `layer` on the files in dir_.
  void Reference(const std::string& layer, const std::vector<int64_t>& shape, float eps) {
    ProcessResult r =
        RunProcess({kPython, kSource + "/tests/torch/layer_reference.py", layer, dir_,
                    "--shape=" + absl::StrJoin(shape, ","), absl::StrCat("--eps=", eps)},
                   300);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
};

TEST_F(TorchLayersTest, LayerNormForwardAndBackwardEqualPyTorchs) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, 64}, {4, 50, 64}}) {
    SCOPED_TRACE(absl::StrJoin(shape, "x"));
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const int64_t d = shape.back();
    const std::vector<float> x = Random(n, 1, 3.0f), dy = Random(n, 2, 1.0f);
    std::vector<float> params = Random(d, 3, 0.5f);  // gamma, then beta
    for (float& g : params) g += 1.0f;
    const std::vector<float> beta = Random(d, 4, 0.5f);
    params.insert(params.end(), beta.begin(), beta.end());
    WriteFloats(dir_ + "/x.f32", x);
    WriteFloats(dir_ + "/dy.f32", dy);
    WriteFloats(dir_ + "/gamma.f32", std::vector<float>(params.begin(), params.begin() + d));
    WriteFloats(dir_ + "/beta.f32", beta);
    Reference("layer_norm", shape, 1e-5f);

    LayerNorm ln("ln", 1e-5f);
    ASSERT_TRUE(ln.Build(Shape(shape.begin() + 1, shape.end())).ok());
    ln.BindOffsets({0, d});
    Tensor in(Shape(shape.begin(), shape.end())), out, dout(in.shape()), din;
    std::copy(x.begin(), x.end(), in.data());
    std::copy(dy.begin(), dy.end(), dout.data());
    ForwardArgs forward;
    forward.training = true;
    forward.params = params.data();
    ln.Forward(in, &out, forward);
    std::vector<float> grads(2 * d);
    BackwardArgs backward;
    backward.params = params.data();
    backward.grads = grads.data();
    ln.Backward(in, out, dout, &din, backward);
    const double y = MaxDifference(ReadFloats(dir_ + "/y.f32"), out.data(), n);
    const double dx = MaxDifference(ReadFloats(dir_ + "/dx.f32"), din.data(), n);
    const double dgamma = MaxDifference(ReadFloats(dir_ + "/dgamma.f32"), grads.data(), d);
    const double dbeta = MaxDifference(ReadFloats(dir_ + "/dbeta.f32"), grads.data() + d, d);
    std::printf(
        "layer_norm %s vs torch.nn.LayerNorm: max |difference| y %.2e, dx %.2e, dgamma "
        "%.2e, dbeta %.2e\n",
        absl::StrJoin(shape, "x").c_str(), y, dx, dgamma, dbeta);
    EXPECT_LE(y, 1e-5);
    EXPECT_LE(dx, 1e-5);
    // Summed over up to 200 rows: relative to the sums' size.
    EXPECT_LE(dgamma, 1e-5 * std::sqrt(n / d) * 4);
    EXPECT_LE(dbeta, 1e-5 * std::sqrt(n / d) * 4);
  }
}

TEST_F(TorchLayersTest, GeluForwardAndBackwardEqualPyTorchs) {
  const std::vector<int64_t> shape = {8, 129};
  const int64_t n = 8 * 129;
  const std::vector<float> x = Random(n, 5, 2.5f), dy = Random(n, 6, 1.0f);
  WriteFloats(dir_ + "/x.f32", x);
  WriteFloats(dir_ + "/dy.f32", dy);
  Reference("gelu", shape, 0);
  ElementwiseActivation gelu("gelu", ActivationKind::kGelu);
  ASSERT_TRUE(gelu.Build({129}).ok());
  Tensor in({8, 129}), out, dout({8, 129}), din;
  std::copy(x.begin(), x.end(), in.data());
  std::copy(dy.begin(), dy.end(), dout.data());
  gelu.Forward(in, &out, {});
  gelu.Backward(in, out, dout, &din, {});
  const double y = MaxDifference(ReadFloats(dir_ + "/y.f32"), out.data(), n);
  const double dx = MaxDifference(ReadFloats(dir_ + "/dx.f32"), din.data(), n);
  std::printf("gelu vs torch.nn.GELU(): max |difference| y %.2e, dx %.2e\n", y, dx);
  EXPECT_LE(y, 1e-5);
  EXPECT_LE(dx, 1e-5);
}

struct AttentionCase {
  int64_t batch, keys, key_dim_in;  // x: [batch, keys, key_dim_in]
  int64_t queries;                  // 0: self-attention
  int64_t embed, heads;             // the query's dim and the heads
  bool causal;
};

void WriteInts(const std::string& path, const std::vector<int32_t>& v) {
  std::string bytes(v.size() * sizeof(int32_t), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  ASSERT_TRUE(Env::Default()->WriteFileAtomic(path, bytes).ok()) << path;
}

TEST_F(TorchLayersTest, MultiHeadAttentionForwardAndBackwardEqualPyTorchs) {
  const AttentionCase cases[] = {
      {4, 50, 64, 0, 64, 4, false},   // self-attention, L = 50, d = 64, 4 heads
      {2, 200, 64, 0, 64, 4, false},  // L = 200
      {3, 20, 32, 0, 32, 2, true},    // causal
      {3, 30, 24, 5, 32, 4, false},   // target: 5 queries of 32 over 30 keys of 24
  };
  for (const AttentionCase& c : cases) {
    const bool cross = c.queries > 0;
    const int64_t lq = cross ? c.queries : c.keys;
    const std::string name =
        absl::StrCat(cross      ? "target"
                     : c.causal ? "causal"
                                : "self",
                     " ", c.batch, "x", c.keys, "x", c.key_dim_in, " heads ", c.heads);
    SCOPED_TRACE(name);
    MultiHeadAttentionOptions o;
    o.heads = static_cast<int>(c.heads);
    o.key_dim = static_cast<int>(c.embed / c.heads);
    o.causal = c.causal;
    MultiHeadAttention layer("mha", o);
    std::vector<Shape> shapes = {{c.keys, c.key_dim_in}};
    if (cross) shapes.push_back({lq, c.embed});
    ASSERT_TRUE(layer.BuildInputs(shapes).ok());
    // Weights in the layer's order, each written for PyTorch.
    std::vector<float> params;
    std::vector<int64_t> offsets;
    const char* names[] = {"wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo"};
    const std::vector<VariableSpec> vars = layer.Variables();
    ASSERT_EQ(vars.size(), 8u);
    for (size_t v = 0; v < vars.size(); ++v) {
      const std::vector<float> w = Random(NumElements(vars[v].shape), 10 + v, 0.15f);
      WriteFloats(dir_ + "/" + names[v] + ".f32", w);
      offsets.push_back(static_cast<int64_t>(params.size()));
      params.insert(params.end(), w.begin(), w.end());
    }
    layer.BindOffsets(offsets);
    const std::vector<float> x = Random(c.batch * c.keys * c.key_dim_in, 1, 1.0f);
    const std::vector<float> q = Random(c.batch * lq * c.embed, 2, 1.0f);
    const std::vector<float> dy = Random(c.batch * lq * c.embed, 3, 1.0f);
    std::vector<int32_t> lengths;  // every example keeps a key or more
    for (int64_t b = 0; b < c.batch; ++b) {
      lengths.push_back(static_cast<int32_t>(std::max<int64_t>(1, c.keys - 7 * b)));
    }
    WriteFloats(dir_ + "/x.f32", x);
    if (cross) {
      WriteFloats(dir_ + "/q.f32", q);
    } else {
      std::remove((dir_ + "/q.f32").c_str());
    }
    WriteFloats(dir_ + "/dy.f32", dy);
    WriteInts(dir_ + "/lengths.i32", lengths);
    std::vector<std::string> command = {
        kPython,
        kSource + "/tests/torch/layer_reference.py",
        "mha",
        dir_,
        absl::StrCat("--shape=", c.batch, ",", c.keys, ",", c.key_dim_in),
        absl::StrCat("--query_shape=", c.batch, ",", lq, ",", c.embed),
        absl::StrCat("--heads=", c.heads)};
    if (c.causal) command.push_back("--causal");
    ProcessResult r = RunProcess(command, 300);
    ASSERT_EQ(r.exit_code, 0) << r.output;

    Tensor xin({c.batch, c.keys, c.key_dim_in}), qin({c.batch, lq, c.embed}), out;
    std::copy(x.begin(), x.end(), xin.data());
    std::copy(q.begin(), q.end(), qin.data());
    std::vector<const Tensor*> in = {&xin};
    if (cross) in.push_back(&qin);
    ForwardArgs forward;
    forward.training = true;
    forward.params = params.data();
    forward.lengths = {lengths.data()};
    layer.ForwardInputs(in, &out, forward);
    Tensor dout(out.shape()), dx, dq;
    std::copy(dy.begin(), dy.end(), dout.data());
    std::vector<float> grads(params.size());
    BackwardArgs backward;
    backward.params = params.data();
    backward.grads = grads.data();
    backward.lengths = forward.lengths;
    std::vector<Tensor*> din = {&dx};
    if (cross) din.push_back(&dq);
    layer.BackwardInputs(in, out, dout, din, backward);

    std::string line = name + " vs torch.nn.MultiheadAttention: max |difference|";
    auto compare = [&](const std::string& file, const float* got, size_t n, double bound) {
      const double most = MaxDifference(ReadFloats(dir_ + "/" + file + ".f32"), got, n);
      absl::StrAppendFormat(&line, " %s %.1e", file, most);
      EXPECT_LE(most, bound) << file;
    };
    compare("y", out.data(), out.size(), 1e-5);
    compare("dx", dx.data(), dx.size(), 1e-5);
    if (cross) compare("dq", dq.data(), dq.size(), 1e-5);
    for (size_t v = 0; v < vars.size(); ++v) {
      // Sums over every row of the batch (up to 800): relative to their size.
      const double rows = static_cast<double>(c.batch * std::max(lq, c.keys));
      compare(absl::StrCat("d", names[v]), grads.data() + offsets[v], NumElements(vars[v].shape),
              1e-5 * std::max(1.0, std::sqrt(rows)));
    }
    std::printf("%s\n", line.c_str());
  }
}

struct MmoeCase {
  int64_t batch, d;
  int experts, tasks;
  std::vector<int> units;
};

// The whole layer against torch.nn.Linear, ReLU and softmax on its weights:
// the output, the input's gradient and every variable's.
TEST_F(TorchLayersTest, MmoeForwardAndBackwardEqualPyTorchs) {
  const MmoeCase cases[] = {
      {16, 8, 3, 2, {6, 4}},     // the brief's shape
      {64, 32, 4, 3, {64, 16}},  // wider
      {256, 20, 2, 1, {8}},      // one task, one layer
      {8, 5, 1, 2, {7, 5, 3}},   // one expert: gates of one value, always 1
  };
  for (const MmoeCase& c : cases) {
    const std::string name =
        absl::StrCat("mmoe ", c.batch, "x", c.d, " experts ", c.experts, " tasks ", c.tasks,
                     " units ", absl::StrJoin(c.units, ","));
    SCOPED_TRACE(name);
    MmoeOptions o;
    o.experts = c.experts;
    o.tasks = c.tasks;
    o.units = c.units;
    Mmoe layer("mmoe", o);
    ASSERT_TRUE(layer.Build({c.d}).ok());
    std::vector<int64_t> offsets;
    int64_t total = 0;
    const std::vector<VariableSpec> vars = layer.Variables();
    for (const VariableSpec& v : vars) {
      offsets.push_back(total);
      total += NumElements(v.shape);
    }
    layer.BindOffsets(offsets);
    // Biases off zero, so that the gradients of every one are tested.
    const std::vector<float> params = Random(total, 7, 0.3f);
    const int64_t out_size = c.batch * c.tasks * c.units.back();
    const std::vector<float> x = Random(c.batch * c.d, 1, 1.0f), dy = Random(out_size, 2, 1.0f);
    WriteFloats(dir_ + "/x.f32", x);
    WriteFloats(dir_ + "/dy.f32", dy);
    WriteFloats(dir_ + "/params.f32", params);
    ProcessResult r = RunProcess(
        {kPython, kSource + "/tests/torch/layer_reference.py", "mmoe", dir_,
         absl::StrCat("--shape=", c.batch, ",", c.d), absl::StrCat("--experts=", c.experts),
         absl::StrCat("--tasks=", c.tasks), "--units=" + absl::StrJoin(c.units, ",")},
        300);
    ASSERT_EQ(r.exit_code, 0) << r.output;

    Tensor in({c.batch, c.d}), out, din;
    std::copy(x.begin(), x.end(), in.data());
    ForwardArgs forward;
    forward.training = true;
    forward.params = params.data();
    layer.Forward(in, &out, forward);
    Tensor dout(out.shape());
    std::copy(dy.begin(), dy.end(), dout.data());
    std::vector<float> grads(total);
    BackwardArgs backward;
    backward.params = params.data();
    backward.grads = grads.data();
    layer.Backward(in, out, dout, &din, backward);

    const double y = MaxDifference(ReadFloats(dir_ + "/y.f32"), out.data(), out.size());
    const double dx = MaxDifference(ReadFloats(dir_ + "/dx.f32"), din.data(), din.size());
    const std::vector<float> theirs = ReadFloats(dir_ + "/dparams.f32");
    ASSERT_EQ(theirs.size(), grads.size());
    std::string line = absl::StrFormat(
        "%s vs torch.nn.Linear/ReLU/softmax: max |difference| y %.1e, dx %.1e", name, y, dx);
    EXPECT_LE(y, 1e-5);
    EXPECT_LE(dx, 1e-5);
    double most = 0;
    for (size_t v = 0; v < vars.size(); ++v) {
      // Sums over the batch's rows: relative to their size.
      const int64_t n = NumElements(vars[v].shape);
      const double diff = MaxDifference(
          std::vector<float>(theirs.begin() + offsets[v], theirs.begin() + offsets[v] + n),
          grads.data() + offsets[v], n);
      EXPECT_LE(diff, 1e-5 * std::max(1.0, std::sqrt(static_cast<double>(c.batch))))
          << vars[v].name;
      most = std::max(most, diff);
    }
    absl::StrAppendFormat(&line, ", variables' gradients %.1e", most);
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace
}  // namespace pstrain
