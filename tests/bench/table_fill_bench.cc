// A dynamic embedding table filled to tens of millions of rows over P ps
// (issue 28): how fast rows are created and updated, and what a ps holds per
// row against the row's own bytes.
//
//   pstrain-table-fill-bench [--rows=50000000] [--dim=8] [--batch=65536] [--num_ps=2]
//
// P ps tasks, each a PsTask with its SparseShard (async, Adagrad) served over
// real gRPC on loopback, run in this process (rpc/testing/ps_test_util.h), so the
// process's resident memory is theirs plus one client's. One client, the
// worker's own PsClient, pulls each step's `batch` new ids (which creates
// their rows, drawn from their initializer, on the ps that own them by the
// hash of (table, id)) and pushes a gradient row for each (which gives every
// row its Adagrad slot), until the table holds `rows` rows. Prints progress
// every 5M rows and then:
//   rows held per ps, rows/s created (pull + push), the ps's resident memory
//   per row (VmRSS after the fill minus VmRSS before it, over the rows) and
//   its ratio to the row + slot bytes (Adagrad: 2 x dim floats).
// Ids are distinct and spread over 63 bits as fingerprints are (a bijection
// of a counter: an odd multiplier and an xorshift, both modulo 2^63).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/malloc_tuning.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "models/dense.h"
#include "models/embedding.h"
#include "models/model.h"
#include "ps_protocol/shard_layout.h"
#include "rpc/grpc_parameter_servers.h"
#include "rpc/ps_client.h"
#include "rpc/testing/ps_test_util.h"

DEFINE_int64(rows, 50000000, "Rows to fill the table with.");
DEFINE_int64(dim, 8, "Floats per row.");
DEFINE_int64(batch, 65536, "New ids per step.");
DEFINE_int32(num_ps, 2, "Parameter servers the table is spread over.");

namespace pstrain {
namespace {

void CheckOk(const absl::Status& s) { CHECK(s.ok()) << s; }

int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kb = 0;
      std::string digits;
      for (char c : line)
        if (c >= '0' && c <= '9') digits += c;
      CHECK(absl::SimpleAtoi(digits, &kb)) << line;
      return kb * 1024;
    }
  }
  LOG(FATAL) << "no VmRSS in /proc/self/status";
  return 0;
}

int Run() {
  TuneMallocForLargeBuffers();
  if (FLAGS_rows < 1 || FLAGS_batch < 1 || FLAGS_batch > (int64_t{1} << 24) || FLAGS_dim < 1 ||
      FLAGS_dim > kMaxEmbeddingDim || FLAGS_num_ps < 1 || FLAGS_num_ps > 64) {
    std::fprintf(stderr,
                 "pstrain-table-fill-bench: --rows >= 1, --batch in [1, 2^24], --dim in [1, "
                 "65536], --num_ps in [1, 64]\n");
    return 2;
  }
  const int num_ps = FLAGS_num_ps;
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Embedding>(
      "emb",
      EmbeddingOptions{"f", FLAGS_dim, 0, Combiner::kSum, {TableInitializer::kUniform, 0.05f}}));
  DenseOptions logit;
  logit.units = 1;
  layers.push_back(std::make_unique<Dense>("dense", logit));
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create("fill", {1}, 2, std::move(layers), {{0}, {1}}, Head::kBinary);
  CHECK(model.ok()) << model.status();

  const int64_t steps = FLAGS_rows / FLAGS_batch + 2;
  testing_util::TestPsOptions ps_options;
  ps_options.sparse_model = model->get();
  ps_options.train_steps = steps + 10;
  std::vector<std::unique_ptr<testing_util::TestPs>> ps;
  std::vector<std::string> addresses;
  for (int i = 0; i < num_ps; ++i) {
    ps.push_back(testing_util::StartPs(i, num_ps, nullptr, WireSecurity(), ps_options));
    addresses.push_back(ps.back()->address);
  }
  PsClientOptions o;
  o.ps_addresses = addresses;
  o.layout = ComputeShardLayout(testing_util::kNumParams, /*num_state=*/1, {0}, num_ps);
  o.layout.tables = ComputeShardLayout(**model, num_ps).tables;
  o.replica = 0;
  o.rpc_timeout = absl::Seconds(60);
  o.retry_budget = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(o);
  CHECK(client.ok()) << client.status();
  absl::StatusOr<std::unique_ptr<GrpcParameterServers>> servers =
      GrpcParameterServers::Create(addresses, o.layout, o.rpc_timeout, o.retry_budget);
  CHECK(servers.ok()) << servers.status();
  std::vector<float> params(testing_util::kNumParams, 0.0f);
  const float state = 0.0f;
  CheckOk((*servers)->Initialize("tiny", params.data(), &state, 0));

  std::printf("filling a dynamic table of dim %lld to %lld rows over %d ps, %lld new ids a step\n",
              static_cast<long long>(FLAGS_dim), static_cast<long long>(FLAGS_rows), num_ps,
              static_cast<long long>(FLAGS_batch));
  const int64_t rss_before = ResidentBytes();
  constexpr uint64_t kLow63 = (uint64_t{1} << 63) - 1;
  uint64_t counter = 0;
  std::vector<float> grads(testing_util::kNumParams, 0.0f);
  float batch_stats = 0.0f;
  int64_t filled = 0, next_report = 5000000;
  const absl::Time start = absl::Now();
  for (int64_t s = 0; filled < FLAGS_rows; ++s) {
    CheckOk((*client)->Pull().status());
    const int64_t n = std::min(FLAGS_batch, FLAGS_rows - filled);
    SparseStep step;
    step.examples = n;
    step.offsets.assign(1, std::vector<int64_t>(n + 1));
    step.tables.resize(1);
    TableStep& table = step.tables[0];
    for (int64_t k = 0; k < n; ++k) {
      uint64_t x = (++counter * 0x9E3779B97F4A7C15ull) & kLow63;
      x ^= x >> 31;
      const auto id = static_cast<int64_t>(x);
      table.ids.push_back(id);
      table.slots.push_back(static_cast<int32_t>(k));
      step.offsets[0][k + 1] = k + 1;
    }
    CheckOk((*client)->PullRows(&step));
    table.grads.assign(table.rows.size(), 0.01f);
    absl::StatusOr<PushOutcome> pushed = (*client)->Push(s, grads.data(), &batch_stats);
    CHECK(pushed.ok()) << pushed.status();
    filled += n;
    if (filled >= next_report || filled == FLAGS_rows) {
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      std::printf("  %lld rows, %.0f s, %.0f rows/s, resident %.2f GB\n",
                  static_cast<long long>(filled), seconds, filled / seconds,
                  (ResidentBytes() - rss_before) / 1e9);
      std::fflush(stdout);
      next_report += 5000000;
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const int64_t rss_after = ResidentBytes();
  int64_t held = 0;
  std::string per_ps;
  for (int i = 0; i < num_ps; ++i) {
    const int64_t rows = ps[i]->task->sparse()->tables()[0]->size();
    held += rows;
    absl::StrAppend(&per_ps, i ? ", " : "", rows);
  }
  const double per_row = static_cast<double>(rss_after - rss_before) / held;
  const double row_bytes = 2.0 * FLAGS_dim * sizeof(float);
  std::printf("rows held: %lld (per ps: %s)\n", static_cast<long long>(held), per_ps.c_str());
  std::printf("fill: %.1f s, %.0f rows/s created and updated (pull + push)\n", seconds,
              held / seconds);
  std::printf(
      "ps memory: %.2f GB resident for the rows, %.1f bytes per row; %.0f bytes of weights + "
      "Adagrad slot per row: %.2fx\n",
      (rss_after - rss_before) / 1e9, per_row, row_bytes, per_row / row_bytes);
  for (auto& p : ps) p->server->Shutdown();
  return held == FLAGS_rows ? 0 : 1;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  return pstrain::Run();
}
