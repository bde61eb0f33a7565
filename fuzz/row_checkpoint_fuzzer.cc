// The row file reader (io/row_checkpoint.h) on arbitrary bytes. Checks: no
// crash, leak or allocation beyond the input's size; a file it accepts has
// rows of its tables' sizes, and writing those rows again gives a file that
// reads back the same.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/env.h"
#include "io/row_checkpoint.h"

namespace {

struct RowKey {
  int table;
  int64_t id;
  int64_t last_step;
  int64_t pushes;
};

// Every row a read visited, its floats in one vector.
struct Rows {
  std::vector<RowKey> keys;
  std::vector<float> floats;

  absl::Status Add(int table, int64_t id, absl::Span<const float> weights,
                   absl::Span<const float> slots, int64_t last_step, int64_t pushes) {
    keys.push_back({table, id, last_step, pushes});
    floats.insert(floats.end(), weights.begin(), weights.end());
    floats.insert(floats.end(), slots.begin(), slots.end());
    return absl::OkStatus();
  }
};

absl::StatusOr<pstrain::RowFileContents> Parse(std::string_view bytes, Rows* rows) {
  return pstrain::ParseRowFile(
      bytes, "/j/model.ckpt-1.rows-0-of-1",
      [rows](int table, int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
             int64_t last_step,
             int64_t pushes) { return rows->Add(table, id, weights, slots, last_step, pushes); });
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Rows rows;
  absl::StatusOr<pstrain::RowFileContents> contents = Parse(bytes, &rows);
  if (!contents.ok()) {
    if (!rows.keys.empty()) std::abort();  // rows of a file it refused
    return 0;
  }
  // The rows match their tables, and the file says how many there are.
  std::vector<int64_t> counted(contents->tables.size(), 0);
  size_t at = 0;
  std::vector<size_t> offsets;  // of each row's floats
  for (const RowKey& key : rows.keys) {
    if (key.table < 0 || static_cast<size_t>(key.table) >= contents->tables.size()) std::abort();
    const pstrain::RowTableHeader& t = contents->tables[key.table];
    ++counted[key.table];
    offsets.push_back(at);
    at += t.dim + t.slot_floats;
  }
  if (at != rows.floats.size() || counted != contents->rows) std::abort();

  // Written again, it reads back the same.
  pstrain::RowFileWriter writer(contents->tables);
  for (size_t r = 0; r < rows.keys.size(); ++r) {
    const RowKey& key = rows.keys[r];
    const pstrain::RowTableHeader& t = contents->tables[key.table];
    const float* f = rows.floats.data() + offsets[r];
    writer.Add(key.table, key.id, absl::MakeConstSpan(f, t.dim),
               absl::MakeConstSpan(f + t.dim, t.slot_floats), key.last_step, key.pushes);
  }
  pstrain::MemEnv env;
  if (!writer.Write(&env, "/j/again", contents->global_step).ok()) std::abort();
  Rows again;
  absl::StatusOr<pstrain::RowFileContents> reread = Parse(*env.ReadFile("/j/again"), &again);
  if (!reread.ok() || reread->global_step != contents->global_step ||
      reread->rows != contents->rows || reread->tables.size() != contents->tables.size() ||
      again.keys.size() != rows.keys.size() || !SameBits(again.floats, rows.floats)) {
    std::abort();
  }
  for (size_t t = 0; t < contents->tables.size(); ++t) {
    const pstrain::RowTableHeader &a = contents->tables[t], &b = reread->tables[t];
    if (a.name != b.name || a.dim != b.dim || a.slot_floats != b.slot_floats ||
        a.optimizer != b.optimizer) {
      std::abort();
    }
  }
  for (size_t r = 0; r < rows.keys.size(); ++r) {
    const RowKey &a = rows.keys[r], &b = again.keys[r];
    if (a.table != b.table || a.id != b.id || a.last_step != b.last_step || a.pushes != b.pushes) {
      std::abort();
    }
  }
  return 0;
}
