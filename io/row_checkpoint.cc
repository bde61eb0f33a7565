#include "io/row_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/committed_file.h"
#include "common/crc32c.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "row files hold little-endian floats, copied as they are in memory");

using row_file::kBlockHeaderSize;
using row_file::kCrcSize;
using row_file::kHeaderFrameSize;
using row_file::kMagic;
using row_file::kMaxRowFloats;
using row_file::kPreludeSize;
using row_file::kRowPrefixSize;
using row_file::kTrailerSize;
using row_file::kTrailerTag;
using row_file::kVersion;

// Bytes a table header takes in the body besides its two strings.
constexpr size_t kTableHeaderFixedSize = 4 + 4 + 3 * 8;

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

void PutString(std::string* out, const std::string& s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

uint32_t MaskedCrc(std::string_view data) {
  return crc32c::Mask(crc32c::Value(data.data(), data.size()));
}

int64_t RowBytes(int64_t dim, int64_t slot_floats) {
  return static_cast<int64_t>(kRowPrefixSize) +
         static_cast<int64_t>(sizeof(float)) * (dim + slot_floats);
}

absl::Status RowsDataLoss(const std::string& source, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(source, ": ", what));
}

// Reads the file's bytes front to back; every read is checked by the caller
// with Has() first.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes, size_t base = 0) : bytes_(bytes), base_(base) {}

  // The offset in the file of the next byte.
  size_t offset() const { return base_ + at_; }
  size_t remaining() const { return bytes_.size() - at_; }
  bool Has(size_t n) const { return remaining() >= n; }

  std::string_view Take(size_t n) {
    std::string_view s = bytes_.substr(at_, n);
    at_ += n;
    return s;
  }
  uint32_t U32() { return DecodeFixed32(Take(4).data()); }
  uint64_t U64() { return DecodeFixed64(Take(8).data()); }

 private:
  const std::string_view bytes_;
  const size_t base_;  // offset of bytes_[0] in the file
  size_t at_ = 0;
};

// A block whose framing and CRCs were checked.
struct CheckedBlock {
  int table = 0;
  int64_t rows = 0;
  size_t offset = 0;  // of its first row
};

// Parses the header body (its CRC already checked) into `contents`.
absl::Status ParseHeaderBody(std::string_view body, size_t body_offset, const std::string& source,
                             RowFileContents* contents) {
  Cursor in(body, body_offset);
  auto malformed = [&](absl::string_view what) {
    return RowsDataLoss(source,
                        absl::StrCat("its header at offset ", body_offset, " is malformed (", what,
                                     "); it was not written by RowFileWriter"));
  };
  if (!in.Has(12)) return malformed("shorter than a step and a table count");
  contents->global_step = static_cast<int64_t>(in.U64());
  const uint32_t num_tables = in.U32();
  if (contents->global_step < 0) {
    return malformed(absl::StrCat("global step ", contents->global_step));
  }
  // Each table takes at least kTableHeaderFixedSize bytes: the vectors grow
  // only with what the body holds.
  if (num_tables > row_file::kMaxTables || num_tables > in.remaining() / kTableHeaderFixedSize) {
    return malformed(absl::StrCat(num_tables, " tables in ", in.remaining(), " bytes"));
  }
  std::set<std::string> names;
  for (uint32_t t = 0; t < num_tables; ++t) {
    RowTableHeader table;
    if (!in.Has(4)) return malformed(absl::StrCat("table ", t, " of ", num_tables, " is cut"));
    const uint32_t name_size = in.U32();
    if (!in.Has(name_size)) return malformed(absl::StrCat("the name of table ", t, " is cut"));
    table.name = std::string(in.Take(name_size));
    if (!in.Has(4)) return malformed(absl::StrCat("table \"", table.name, "\" is cut"));
    const uint32_t optimizer_size = in.U32();
    if (!in.Has(optimizer_size + size_t{24})) {
      return malformed(absl::StrCat("table \"", table.name, "\" is cut"));
    }
    table.optimizer = std::string(in.Take(optimizer_size));
    table.dim = static_cast<int64_t>(in.U64());
    table.slot_floats = static_cast<int64_t>(in.U64());
    const int64_t rows = static_cast<int64_t>(in.U64());
    if (table.name.empty() || !names.insert(table.name).second) {
      return malformed(
          absl::StrCat("table ", t, " has an empty or repeated name \"", table.name, "\""));
    }
    if (table.dim < 1 || table.dim > kMaxRowFloats || table.slot_floats < 0 ||
        table.slot_floats > kMaxRowFloats - table.dim || rows < 0) {
      return malformed(absl::StrCat("table \"", table.name, "\" has dim ", table.dim, ", ",
                                    table.slot_floats, " slot floats and ", rows, " rows"));
    }
    contents->tables.push_back(std::move(table));
    contents->rows.push_back(rows);
  }
  if (in.remaining() != 0) {
    return malformed(absl::StrCat(in.remaining(), " bytes follow the last table"));
  }
  return absl::OkStatus();
}

// Checks everything but the rows' values; returns the blocks in file order.
absl::StatusOr<std::vector<CheckedBlock>> CheckFile(std::string_view bytes,
                                                    const std::string& source,
                                                    RowFileContents* contents) {
  if (bytes.empty()) return RowsDataLoss(source, "is empty");
  const size_t magic_seen = std::min(bytes.size(), kMagic.size());
  if (bytes.substr(0, magic_seen) != kMagic.substr(0, magic_seen)) {
    return RowsDataLoss(source,
                        absl::StrCat("is not a row checkpoint file (it does not start with \"",
                                     AbslView(kMagic), "\")"));
  }
  Cursor in(bytes);
  if (!in.Has(kPreludeSize)) {
    return RowsDataLoss(
        source, absl::StrCat("is truncated: ", bytes.size(), " bytes, less than its ", kPreludeSize,
                             "-byte prelude"));
  }
  const std::string_view prelude = in.Take(kPreludeSize - kCrcSize);
  if (MaskedCrc(prelude) != in.U32()) {
    return RowsDataLoss(source, "its prelude (magic and format version) is damaged: CRC mismatch");
  }
  const uint32_t version = DecodeFixed32(prelude.data() + kMagic.size());
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": a row checkpoint file of format version ", version,
        "; this pstrain reads version ", kVersion, " (written by another pstrain release?)"));
  }

  // The header.
  if (!in.Has(kHeaderFrameSize)) {
    return RowsDataLoss(source, absl::StrCat("ends at offset ", bytes.size(),
                                             " within its header's length (truncated)"));
  }
  const size_t length_offset = in.offset();
  const std::string_view length_bytes = in.Take(8);
  if (MaskedCrc(length_bytes) != in.U32()) {
    return RowsDataLoss(source, absl::StrCat("its header's length at offset ", length_offset,
                                             " is damaged: CRC mismatch"));
  }
  const uint64_t body_size = DecodeFixed64(length_bytes.data());
  const size_t body_offset = in.offset();
  if (!in.Has(kCrcSize) || body_size > in.remaining() - kCrcSize) {
    return RowsDataLoss(
        source, absl::StrCat("ends within its header: the header at offset ", body_offset, " has ",
                             body_size, " bytes and a CRC, only ", in.remaining(),
                             " bytes follow (truncated)"));
  }
  const std::string_view body = in.Take(body_size);
  const uint32_t header_crc = in.U32();
  if (MaskedCrc(body) != header_crc) {
    return RowsDataLoss(
        source, absl::StrCat("its header at offset ", body_offset, " is damaged: CRC mismatch"));
  }
  PSTRAIN_RETURN_IF_ERROR(ParseHeaderBody(body, body_offset, source, contents));
  const std::vector<RowTableHeader>& tables = contents->tables;
  std::vector<int64_t> row_bytes;
  for (size_t t = 0; t < tables.size(); ++t) {
    row_bytes.push_back(RowBytes(tables[t].dim, tables[t].slot_floats));
    // A table's rows are in the file: refuse a count the bytes cannot hold
    // before reading any block.
    if (static_cast<uint64_t>(contents->rows[t]) > in.remaining() / row_bytes[t]) {
      return RowsDataLoss(
          source, absl::StrCat("table \"", tables[t].name, "\" has ", contents->rows[t],
                               " rows of ", row_bytes[t], " bytes, but only ", in.remaining(),
                               " bytes follow the header (truncated)"));
    }
  }

  // The blocks, then the trailer.
  std::vector<CheckedBlock> blocks;
  std::vector<int64_t> seen(tables.size(), 0);
  uint64_t total_rows = 0;
  for (;;) {
    const size_t offset = in.offset();
    const std::string where = absl::StrCat("block ", blocks.size(), " at offset ", offset);
    if (!in.Has(4)) {
      return RowsDataLoss(
          source, absl::StrCat("ends at offset ", bytes.size(), " before its trailer (truncated)"));
    }
    if (DecodeFixed32(bytes.data() + offset) == kTrailerTag) break;
    if (!in.Has(kBlockHeaderSize)) {
      return RowsDataLoss(source, absl::StrCat("ends at offset ", bytes.size(),
                                               " within the header of ", where, " (truncated)"));
    }
    const std::string_view block_header = in.Take(kBlockHeaderSize - kCrcSize);
    if (MaskedCrc(block_header) != in.U32()) {
      return RowsDataLoss(source,
                          absl::StrCat("the header of ", where, " is damaged: CRC mismatch"));
    }
    const uint32_t table = DecodeFixed32(block_header.data());
    const uint64_t count = DecodeFixed64(block_header.data() + 4);
    std::string malformed;
    if (table >= tables.size()) {
      malformed =
          absl::StrCat("it names table ", table, "; the header has ", tables.size(), " tables");
    } else if (!blocks.empty() && blocks.back().table > static_cast<int>(table)) {
      malformed = absl::StrCat("it is of table ", table, " but follows a block of table ",
                               blocks.back().table, " (blocks go in table order)");
    } else if (count == 0 || count > static_cast<uint64_t>(contents->rows[table] - seen[table])) {
      malformed = absl::StrCat("it holds ", count, " rows of table \"", tables[table].name,
                               "\"; the header leaves ", contents->rows[table] - seen[table],
                               " of its ", contents->rows[table]);
    }
    if (!malformed.empty()) {
      return RowsDataLoss(source, absl::StrCat(where, " is malformed: ", malformed,
                                               "; it was not written by RowFileWriter"));
    }
    const size_t row_offset = in.offset();
    if (!in.Has(kCrcSize) || count > (in.remaining() - kCrcSize) / row_bytes[table]) {
      return RowsDataLoss(source,
                          absl::StrCat(where, " of table \"", tables[table].name, "\" has ", count,
                                       " rows of ", row_bytes[table], " bytes and a CRC, only ",
                                       in.remaining(), " bytes follow (truncated)"));
    }
    const std::string_view rows = in.Take(count * row_bytes[table]);
    if (MaskedCrc(rows) != in.U32()) {
      return RowsDataLoss(source,
                          absl::StrCat("the rows of ", where, " (table \"", tables[table].name,
                                       "\") are damaged: CRC mismatch"));
    }
    blocks.push_back({static_cast<int>(table), static_cast<int64_t>(count), row_offset});
    seen[table] += static_cast<int64_t>(count);
    total_rows += count;
  }
  const size_t trailer_offset = in.offset();
  if (!in.Has(kTrailerSize)) {
    return RowsDataLoss(source,
                        absl::StrCat("ends at offset ", bytes.size(), " within its trailer at ",
                                     trailer_offset, " (truncated)"));
  }
  const std::string_view trailer = in.Take(kTrailerSize - kCrcSize);
  if (MaskedCrc(trailer) != in.U32()) {
    return RowsDataLoss(source, absl::StrCat("its trailer at offset ", trailer_offset,
                                             " is damaged: CRC mismatch"));
  }
  const uint64_t trailer_rows = DecodeFixed64(trailer.data() + 4);
  const uint64_t trailer_blocks = DecodeFixed64(trailer.data() + 12);
  const std::string trailer_at = absl::StrCat("its trailer at offset ", trailer_offset);
  if (DecodeFixed32(trailer.data() + 20) != header_crc) {
    return RowsDataLoss(source,
                        absl::StrCat(trailer_at, " is of another file's header (files spliced)"));
  }
  if (trailer_rows != total_rows || trailer_blocks != blocks.size()) {
    return RowsDataLoss(source, absl::StrCat(trailer_at, " counts ", trailer_rows, " rows in ",
                                             trailer_blocks, " blocks; the file has ", total_rows,
                                             " in ", blocks.size(), " (blocks lost or spliced)"));
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    if (seen[t] != contents->rows[t]) {
      return RowsDataLoss(
          source,
          absl::StrCat("table \"", tables[t].name, "\" has ", seen[t], " rows in blocks before ",
                       trailer_at, "; its header says ", contents->rows[t], " (blocks lost)"));
    }
  }
  if (in.remaining() != 0) {
    return RowsDataLoss(source,
                        absl::StrCat("has ", in.remaining(), " bytes after its trailer at offset ",
                                     trailer_offset));
  }
  return blocks;
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
    t.row_bytes = RowBytes(h.dim, h.slot_floats);
    t.rows_per_block = std::max<int64_t>(1, block_bytes / t.row_bytes);
    tables_.push_back(std::move(t));
  }
}

void RowFileWriter::Add(int table, int64_t id, absl::Span<const float> weights,
                        absl::Span<const float> slots, int64_t last_step) {
  CHECK(table >= 0 && static_cast<size_t>(table) < tables_.size()) << "no table " << table;
  const RowTableHeader& h = headers_[table];
  CHECK_EQ(static_cast<int64_t>(weights.size()), h.dim) << "weights of a row of " << h.name;
  CHECK_EQ(static_cast<int64_t>(slots.size()), h.slot_floats) << "slots of a row of " << h.name;
  Table& t = tables_[table];
  if (t.blocks.empty() || t.blocks.back().rows == t.rows_per_block) {
    t.blocks.emplace_back();
    // A table that fills a block likely fills the next: give it its size at
    // once. The first block grows as rows come, so small tables stay small.
    if (t.blocks.size() > 1) t.blocks.back().bytes.reserve(t.rows_per_block * t.row_bytes);
  }
  Block& block = t.blocks.back();
  const size_t at = block.bytes.size();
  block.bytes.resize(at + t.row_bytes);
  char* p = block.bytes.data() + at;
  EncodeFixed64(p, static_cast<uint64_t>(id));
  EncodeFixed64(p + 8, static_cast<uint64_t>(last_step));
  std::memcpy(p + kRowPrefixSize, weights.data(), weights.size() * sizeof(float));
  if (!slots.empty()) {  // memcpy from a null data() is undefined even for 0 bytes
    std::memcpy(p + kRowPrefixSize + weights.size() * sizeof(float), slots.data(),
                slots.size() * sizeof(float));
  }
  ++block.rows;
  ++t.rows;
  for (float w : weights) t.sum_squares += static_cast<double>(w) * w;
}

absl::Status RowFileWriter::Emit(int64_t global_step,
                                 absl::FunctionRef<absl::Status(std::string_view)> out) const {
  std::string prelude(kMagic);
  PutFixed32(&prelude, kVersion);
  PutFixed32(&prelude, MaskedCrc(prelude));

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
  std::string frame;
  PutFixed64(&frame, body.size());
  PutFixed32(&frame, MaskedCrc(frame));
  const uint32_t header_crc = MaskedCrc(body);
  PutFixed32(&body, header_crc);
  PSTRAIN_RETURN_IF_ERROR(out(prelude));
  PSTRAIN_RETURN_IF_ERROR(out(frame));
  PSTRAIN_RETURN_IF_ERROR(out(body));

  uint64_t total_rows = 0, num_blocks = 0;
  for (size_t i = 0; i < tables_.size(); ++i) {
    for (const Block& block : tables_[i].blocks) {
      std::string header;
      PutFixed32(&header, static_cast<uint32_t>(i));
      PutFixed64(&header, static_cast<uint64_t>(block.rows));
      PutFixed32(&header, MaskedCrc(header));
      PSTRAIN_RETURN_IF_ERROR(out(header));
      PSTRAIN_RETURN_IF_ERROR(out(block.bytes));
      std::string crc;
      PutFixed32(&crc, MaskedCrc(block.bytes));
      PSTRAIN_RETURN_IF_ERROR(out(crc));
      total_rows += block.rows;
      ++num_blocks;
    }
  }
  std::string trailer;
  PutFixed32(&trailer, kTrailerTag);
  PutFixed64(&trailer, total_rows);
  PutFixed64(&trailer, num_blocks);
  PutFixed32(&trailer, header_crc);
  PutFixed32(&trailer, MaskedCrc(trailer));
  return out(trailer);
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
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<CheckedBlock> blocks,
                           CheckFile(bytes, source, &contents));
  PSTRAIN_RETURN_IF_ERROR(on_tables(contents));
  // The rows' bytes need not be aligned for floats: each row is copied out.
  std::vector<float> row;
  for (const CheckedBlock& block : blocks) {
    const RowTableHeader& table = contents.tables[block.table];
    const size_t row_bytes = RowBytes(table.dim, table.slot_floats);
    row.resize(table.dim + table.slot_floats);
    const absl::Span<const float> weights(row.data(), table.dim);
    const absl::Span<const float> slots(row.data() + table.dim, table.slot_floats);
    const char* p = bytes.data() + block.offset;
    for (int64_t r = 0; r < block.rows; ++r, p += row_bytes) {
      std::memcpy(row.data(), p + kRowPrefixSize, row.size() * sizeof(float));
      PSTRAIN_RETURN_IF_ERROR(fn(block.table, static_cast<int64_t>(DecodeFixed64(p)), weights,
                                 slots, static_cast<int64_t>(DecodeFixed64(p + 8))));
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
