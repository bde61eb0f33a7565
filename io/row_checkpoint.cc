#include "io/row_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/committed_file.h"
#include "common/crc32c.h"
#include "common/record_writer.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "io/row_file_check.h"

namespace pstrain {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "row files hold little-endian floats, copied as they are in memory");

using row_file::kBlockHeaderSize;
using row_file::kMagic;
using row_file::kMaxRowFloats;
using row_file::kRowPrefixSize;
using row_file::kTrailerTag;
using row_file::kVersion;
using row_file::RowBytes;

void PutString(std::string* out, const std::string& s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

}  // namespace

RowFileWriter::RowFileWriter(std::vector<RowTableHeader> tables, int64_t block_bytes)
    : headers_(std::move(tables)) {
  CHECK_LE(headers_.size(), size_t{row_file::kMaxTables});
  std::set<std::string> names;
  for (const RowTableHeader& h : headers_) {
    CHECK(!h.name.empty() && names.insert(h.name).second)
        << "row file tables need distinct names: \"" << h.name << "\"";
    CHECK(h.dim >= 1 && h.dim <= kMaxRowFloats && h.slot_floats >= 0 &&
          h.slot_floats <= kMaxRowFloats - h.dim)
        << "table " << h.name << ": dim " << h.dim << ", slot_floats " << h.slot_floats;
    Table t;
    t.row_bytes = RowBytes(h.dim, h.slot_floats, kVersion);
    t.rows_per_block = std::max<int64_t>(1, block_bytes / t.row_bytes);
    tables_.push_back(std::move(t));
  }
}

void RowFileWriter::Add(int table, int64_t id, absl::Span<const float> weights,
                        absl::Span<const float> slots, int64_t last_step, int64_t pushes) {
  CHECK(table >= 0 && static_cast<size_t>(table) < tables_.size()) << "no table " << table;
  const RowTableHeader& h = headers_[table];
  CHECK_EQ(static_cast<int64_t>(weights.size()), h.dim) << "weights of a row of " << h.name;
  CHECK_EQ(static_cast<int64_t>(slots.size()), h.slot_floats) << "slots of a row of " << h.name;
  Table& t = tables_[table];
  if (t.blocks.empty() || t.blocks.back().rows == t.rows_per_block) {
    t.blocks.emplace_back();
    // A table that fills a block likely fills the next: give it its size at
    // once. The first block grows as rows come, so small tables stay small.
    if (t.blocks.size() > 1) {
      t.blocks.back().bytes.reserve(kBlockHeaderSize + t.rows_per_block * t.row_bytes);
    }
    PutFixed32(&t.blocks.back().bytes, static_cast<uint32_t>(table));
    PutFixed64(&t.blocks.back().bytes, 0);  // the count, kept up to date below
  }
  Block& block = t.blocks.back();
  const size_t at = block.bytes.size();
  block.bytes.resize(at + t.row_bytes);
  char* p = block.bytes.data() + at;
  EncodeFixed64(p, static_cast<uint64_t>(id));
  EncodeFixed64(p + 8, static_cast<uint64_t>(last_step));
  EncodeFixed64(p + 16, static_cast<uint64_t>(pushes));
  std::memcpy(p + kRowPrefixSize, weights.data(), weights.size() * sizeof(float));
  if (!slots.empty()) {  // memcpy from a null data() is undefined even for 0 bytes
    std::memcpy(p + kRowPrefixSize + weights.size() * sizeof(float), slots.data(),
                slots.size() * sizeof(float));
  }
  EncodeFixed64(block.bytes.data() + 4, static_cast<uint64_t>(block.rows + 1));
  ++block.rows;
  ++t.rows;
  for (float w : weights) t.sum_squares += static_cast<double>(w) * w;
}

absl::Status RowFileWriter::Emit(int64_t global_step,
                                 absl::FunctionRef<absl::Status(std::string_view)> out) const {
  std::string prelude(kMagic);
  PutFixed32(&prelude, kVersion);
  PSTRAIN_RETURN_IF_ERROR(out(RecordWriter::Frame(prelude)));

  std::string body;
  PutFixed64(&body, static_cast<uint64_t>(global_step));
  PutFixed32(&body, static_cast<uint32_t>(headers_.size()));
  for (size_t i = 0; i < headers_.size(); ++i) {
    PutString(&body, headers_[i].name);
    PutString(&body, headers_[i].optimizer);
    PutFixed64(&body, static_cast<uint64_t>(headers_[i].dim));
    PutFixed64(&body, static_cast<uint64_t>(headers_[i].slot_floats));
    PutFixed64(&body, static_cast<uint64_t>(tables_[i].rows));
  }
  PSTRAIN_RETURN_IF_ERROR(out(RecordWriter::Frame(body)));

  uint64_t total_rows = 0, num_blocks = 0;
  for (const Table& table : tables_) {
    for (const Block& block : table.blocks) {
      // The block (its table, count and rows) as one record, not copied.
      PSTRAIN_RETURN_IF_ERROR(out(RecordWriter::Header(block.bytes)));
      PSTRAIN_RETURN_IF_ERROR(out(block.bytes));
      PSTRAIN_RETURN_IF_ERROR(out(RecordWriter::Footer(block.bytes)));
      total_rows += block.rows;
      ++num_blocks;
    }
  }
  std::string trailer;
  PutFixed32(&trailer, kTrailerTag);
  PutFixed64(&trailer, total_rows);
  PutFixed64(&trailer, num_blocks);
  PutFixed32(&trailer, crc32c::Mask(crc32c::Value(body.data(), body.size())));
  return out(RecordWriter::Frame(trailer));
}

absl::StatusOr<RowFileSummary> RowFileWriter::Write(Env* env, const std::string& path,
                                                    int64_t global_step) const {
  if (global_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("row file ", path, ": negative global step ", global_step));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<CommittedFile> file, CommittedFile::Create(env, path));
  PSTRAIN_RETURN_IF_ERROR(
      Emit(global_step, [&](std::string_view piece) { return file->Append(piece); }));
  PSTRAIN_RETURN_IF_ERROR(file->Commit());
  RowFileSummary summary;
  summary.size_bytes = file->size();
  summary.crc32c = file->crc32c();
  for (const Table& t : tables_) {
    summary.rows.push_back(t.rows);
    summary.sum_squares.push_back(t.sum_squares);
  }
  return summary;
}

absl::StatusOr<RowFileContents> ParseRowFile(std::string_view bytes, const std::string& source,
                                             RowFileTablesVisitor on_tables, RowFileVisitor fn) {
  RowFileContents contents;
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<row_file::CheckedBlock> blocks,
                           row_file::CheckRowFile(bytes, source, &contents));
  PSTRAIN_RETURN_IF_ERROR(on_tables(contents));
  // The rows' bytes need not be aligned for floats: each row is copied out.
  std::vector<float> row;
  for (const row_file::CheckedBlock& block : blocks) {
    const RowTableHeader& table = contents.tables[block.table];
    const size_t row_bytes = RowBytes(table.dim, table.slot_floats, contents.version);
    const bool counted = contents.version >= kVersion;
    const size_t prefix = counted ? kRowPrefixSize : row_file::kUncountedRowPrefixSize;
    row.resize(table.dim + table.slot_floats);
    const absl::Span<const float> weights(row.data(), table.dim);
    const absl::Span<const float> slots(row.data() + table.dim, table.slot_floats);
    const char* p = bytes.data() + block.offset;
    for (int64_t r = 0; r < block.rows; ++r, p += row_bytes) {
      std::memcpy(row.data(), p + prefix, row.size() * sizeof(float));
      PSTRAIN_RETURN_IF_ERROR(fn(block.table, static_cast<int64_t>(DecodeFixed64(p)), weights,
                                 slots, static_cast<int64_t>(DecodeFixed64(p + 8)),
                                 counted ? static_cast<int64_t>(DecodeFixed64(p + 16)) : 0));
    }
  }
  return contents;
}

absl::StatusOr<RowFileContents> ParseRowFile(std::string_view bytes, const std::string& source,
                                             RowFileVisitor fn) {
  return ParseRowFile(
      bytes, source, [](const RowFileContents&) { return absl::OkStatus(); }, fn);
}

absl::StatusOr<RowFileContents> ReadRowFile(Env* env, const std::string& path,
                                            RowFileTablesVisitor on_tables, RowFileVisitor fn) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::string bytes, env->ReadFile(path));
  return ParseRowFile(bytes, path, on_tables, fn);
}

absl::StatusOr<RowFileContents> ReadRowFile(Env* env, const std::string& path, RowFileVisitor fn) {
  return ReadRowFile(
      env, path, [](const RowFileContents&) { return absl::OkStatus(); }, fn);
}

}  // namespace pstrain
