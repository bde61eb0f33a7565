#include "io/row_file_check.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/crc32c.h"
#include "common/record_reader.h"
#include "common/status_macros.h"

namespace pstrain {
namespace row_file {
namespace {

// Bytes a table header takes in the body besides its two strings.
constexpr size_t kTableHeaderFixedSize = 4 + 4 + 3 * 8;

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

uint32_t MaskedCrc(std::string_view data) {
  return crc32c::Mask(crc32c::Value(data.data(), data.size()));
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
  if (num_tables > kMaxTables || num_tables > in.remaining() / kTableHeaderFixedSize) {
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

// What both versions check of the pieces after the header, given each
// piece's bytes once their CRC has been checked.
class BlockChecker {
 public:
  // `contents` holds the parsed header; `header_crc` is its masked CRC.
  BlockChecker(const std::string& source, const RowFileContents& contents, uint32_t header_crc)
      : source_(source), contents_(contents), header_crc_(header_crc) {
    for (const RowTableHeader& t : contents.tables) {
      row_bytes_.push_back(RowBytes(t.dim, t.slot_floats, contents.version));
    }
    seen_.assign(contents.tables.size(), 0);
  }

  int64_t row_bytes(int table) const { return row_bytes_[table]; }
  std::vector<CheckedBlock>& blocks() { return blocks_; }

  // A table's rows are in the file: refuses a count the bytes after the
  // header cannot hold before any block is read.
  absl::Status CheckCountsFit(uint64_t left) const {
    for (size_t t = 0; t < row_bytes_.size(); ++t) {
      if (static_cast<uint64_t>(contents_.rows[t]) > left / row_bytes_[t]) {
        return RowsDataLoss(source_, absl::StrCat("table \"", contents_.tables[t].name, "\" has ",
                                                  contents_.rows[t], " rows of ", row_bytes_[t],
                                                  " bytes, but only ", left,
                                                  " bytes follow the header (truncated)"));
      }
    }
    return absl::OkStatus();
  }

  // The name of the next block in errors.
  std::string Where(size_t offset) const {
    return absl::StrCat("block ", blocks_.size(), " at offset ", offset);
  }

  // Checks a block's 12 header bytes: its table and count against the header
  // and the blocks before it.
  absl::Status CheckBlockHeader(std::string_view header, size_t offset, uint32_t* table,
                                uint64_t* count) const {
    *table = DecodeFixed32(header.data());
    *count = DecodeFixed64(header.data() + 4);
    const std::vector<RowTableHeader>& tables = contents_.tables;
    std::string malformed;
    if (*table >= tables.size()) {
      malformed =
          absl::StrCat("it names table ", *table, "; the header has ", tables.size(), " tables");
    } else if (!blocks_.empty() && blocks_.back().table > static_cast<int>(*table)) {
      malformed = absl::StrCat("it is of table ", *table, " but follows a block of table ",
                               blocks_.back().table, " (blocks go in table order)");
    } else if (*count == 0 ||
               *count > static_cast<uint64_t>(contents_.rows[*table] - seen_[*table])) {
      malformed = absl::StrCat("it holds ", *count, " rows of table \"", tables[*table].name,
                               "\"; the header leaves ", contents_.rows[*table] - seen_[*table],
                               " of its ", contents_.rows[*table]);
    }
    if (malformed.empty()) return absl::OkStatus();
    return RowsDataLoss(source_, absl::StrCat(Where(offset), " is malformed: ", malformed,
                                              "; it was not written by RowFileWriter"));
  }

  // Takes a block whose rows start at `row_offset`.
  void Add(uint32_t table, uint64_t count, size_t row_offset) {
    blocks_.push_back({static_cast<int>(table), static_cast<int64_t>(count), row_offset});
    seen_[table] += static_cast<int64_t>(count);
    total_rows_ += count;
  }

  // Checks the trailer's 24 bytes (before its CRC) against the blocks seen.
  absl::Status CheckTrailer(std::string_view trailer, size_t trailer_offset) const {
    const uint64_t trailer_rows = DecodeFixed64(trailer.data() + 4);
    const uint64_t trailer_blocks = DecodeFixed64(trailer.data() + 12);
    const std::string trailer_at = absl::StrCat("its trailer at offset ", trailer_offset);
    if (DecodeFixed32(trailer.data() + 20) != header_crc_) {
      return RowsDataLoss(source_,
                          absl::StrCat(trailer_at, " is of another file's header (files spliced)"));
    }
    if (trailer_rows != total_rows_ || trailer_blocks != blocks_.size()) {
      return RowsDataLoss(
          source_, absl::StrCat(trailer_at, " counts ", trailer_rows, " rows in ", trailer_blocks,
                                " blocks; the file has ", total_rows_, " in ", blocks_.size(),
                                " (blocks lost or spliced)"));
    }
    for (size_t t = 0; t < seen_.size(); ++t) {
      if (seen_[t] != contents_.rows[t]) {
        return RowsDataLoss(
            source_, absl::StrCat("table \"", contents_.tables[t].name, "\" has ", seen_[t],
                                  " rows in blocks before ", trailer_at, "; its header says ",
                                  contents_.rows[t], " (blocks lost)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::string& source_;
  const RowFileContents& contents_;
  const uint32_t header_crc_;
  std::vector<int64_t> row_bytes_;
  std::vector<int64_t> seen_;
  std::vector<CheckedBlock> blocks_;
  uint64_t total_rows_ = 0;
};

absl::Status AnotherVersion(const std::string& source, uint32_t version) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": a row checkpoint file of format version ", version,
                   "; this pstrain reads versions ", kUnframedVersion, " to ", kVersion,
                   " (written by another pstrain release?)"));
}

// Version 1: its own framing (row_checkpoint.h). `bytes` starts with (a
// prefix of) the magic.
absl::StatusOr<std::vector<CheckedBlock>> CheckUnframedFile(std::string_view bytes,
                                                            const std::string& source,
                                                            RowFileContents* contents) {
  constexpr size_t kCrcSize = 4;
  constexpr size_t kUnframedPreludeSize = kPreludeSize + kCrcSize;
  Cursor in(bytes);
  if (!in.Has(kUnframedPreludeSize)) {
    return RowsDataLoss(source,
                        absl::StrCat("is truncated: ", bytes.size(), " bytes, less than its ",
                                     kUnframedPreludeSize, "-byte prelude"));
  }
  const std::string_view prelude = in.Take(kPreludeSize);
  if (MaskedCrc(prelude) != in.U32()) {
    return RowsDataLoss(source, "its prelude (magic and format version) is damaged: CRC mismatch");
  }
  const uint32_t version = DecodeFixed32(prelude.data() + kMagic.size());
  if (version == kVersion || version == row_file::kUncountedVersion) {
    return RowsDataLoss(source, absl::StrCat("its unframed prelude says version ", version,
                                             ", whose files are TFRecord-framed (damaged)"));
  }
  if (version != kUnframedVersion) return AnotherVersion(source, version);
  contents->version = version;

  // The header.
  if (!in.Has(12)) {
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
  BlockChecker check(source, *contents, header_crc);
  PSTRAIN_RETURN_IF_ERROR(check.CheckCountsFit(in.remaining()));

  // The blocks, then the trailer.
  for (;;) {
    const size_t offset = in.offset();
    if (!in.Has(4)) {
      return RowsDataLoss(
          source, absl::StrCat("ends at offset ", bytes.size(), " before its trailer (truncated)"));
    }
    if (DecodeFixed32(bytes.data() + offset) == kTrailerTag) break;
    const std::string where = check.Where(offset);
    if (!in.Has(kBlockHeaderSize + kCrcSize)) {
      return RowsDataLoss(source, absl::StrCat("ends at offset ", bytes.size(),
                                               " within the header of ", where, " (truncated)"));
    }
    const std::string_view block_header = in.Take(kBlockHeaderSize);
    if (MaskedCrc(block_header) != in.U32()) {
      return RowsDataLoss(source,
                          absl::StrCat("the header of ", where, " is damaged: CRC mismatch"));
    }
    uint32_t table = 0;
    uint64_t count = 0;
    PSTRAIN_RETURN_IF_ERROR(check.CheckBlockHeader(block_header, offset, &table, &count));
    const int64_t row_bytes = check.row_bytes(table);
    const size_t row_offset = in.offset();
    if (!in.Has(kCrcSize) || count > (in.remaining() - kCrcSize) / row_bytes) {
      return RowsDataLoss(
          source, absl::StrCat(where, " of table \"", contents->tables[table].name, "\" has ",
                               count, " rows of ", row_bytes, " bytes and a CRC, only ",
                               in.remaining(), " bytes follow (truncated)"));
    }
    const std::string_view rows = in.Take(count * row_bytes);
    if (MaskedCrc(rows) != in.U32()) {
      return RowsDataLoss(
          source, absl::StrCat("the rows of ", where, " (table \"", contents->tables[table].name,
                               "\") are damaged: CRC mismatch"));
    }
    check.Add(table, count, row_offset);
  }
  const size_t trailer_offset = in.offset();
  if (!in.Has(kTrailerSize + kCrcSize)) {
    return RowsDataLoss(source,
                        absl::StrCat("ends at offset ", bytes.size(), " within its trailer at ",
                                     trailer_offset, " (truncated)"));
  }
  const std::string_view trailer = in.Take(kTrailerSize);
  if (MaskedCrc(trailer) != in.U32()) {
    return RowsDataLoss(source, absl::StrCat("its trailer at offset ", trailer_offset,
                                             " is damaged: CRC mismatch"));
  }
  PSTRAIN_RETURN_IF_ERROR(check.CheckTrailer(trailer, trailer_offset));
  if (in.remaining() != 0) {
    return RowsDataLoss(source,
                        absl::StrCat("has ", in.remaining(), " bytes after its trailer at offset ",
                                     trailer_offset));
  }
  return std::move(check.blocks());
}

// Version 2: TFRecord-framed records.
absl::StatusOr<std::vector<CheckedBlock>> CheckFramedFile(std::string_view bytes,
                                                          const std::string& source,
                                                          RowFileContents* contents) {
  // The first record is the prelude: its length is kPreludeSize in every
  // framed version, so a file of another kind is told from a damaged one.
  const std::string prelude_length = [] {
    std::string s;
    PutFixed64(&s, kPreludeSize);
    return s;
  }();
  const size_t length_seen = std::min(bytes.size(), prelude_length.size());
  if (bytes.substr(0, length_seen) != std::string_view(prelude_length).substr(0, length_seen)) {
    return RowsDataLoss(
        source, absl::StrCat("is not a row checkpoint file (it starts with "
                             "neither a record of \"",
                             AbslView(kMagic), "\" nor \"", AbslView(kMagic), "\" itself)"));
  }
  RecordReader in(bytes, source);
  const auto offset_of = [&](std::string_view data) {
    return static_cast<size_t>(data.data() - bytes.data());
  };
  // The next record, `what` the file expects there (named in errors); the
  // end of the file before the trailer is truncation.
  const auto next = [&](absl::string_view what) -> absl::StatusOr<std::string_view> {
    const uint64_t offset = in.offset();
    absl::StatusOr<std::string_view> record = in.ReadRecord();
    if (absl::IsOutOfRange(record.status())) {
      return RowsDataLoss(
          source, absl::StrCat("ends at offset ", offset, " before its ", what, " (truncated)"));
    }
    if (!record.ok()) {
      return absl::Status(record.status().code(),
                          absl::StrCat(record.status().message(), " (its ", what, ")"));
    }
    return record;
  };
  PSTRAIN_ASSIGN_OR_RETURN(const std::string_view prelude, next("prelude"));
  if (prelude.size() != kPreludeSize || prelude.substr(0, kMagic.size()) != kMagic) {
    return RowsDataLoss(source, absl::StrCat("is not a row checkpoint file (its first record is "
                                             "not \"",
                                             AbslView(kMagic), "\" and a version)"));
  }
  const uint32_t version = DecodeFixed32(prelude.data() + kMagic.size());
  if (version == row_file::kUnframedVersion) {
    return RowsDataLoss(source, absl::StrCat("its framed prelude says version ", version,
                                             ", whose files are not TFRecord-framed (damaged)"));
  }
  if (version != kVersion && version != row_file::kUncountedVersion) {
    return AnotherVersion(source, version);
  }
  contents->version = version;

  PSTRAIN_ASSIGN_OR_RETURN(const std::string_view body, next("header"));
  PSTRAIN_RETURN_IF_ERROR(ParseHeaderBody(body, offset_of(body), source, contents));
  BlockChecker check(source, *contents, MaskedCrc(body));
  PSTRAIN_RETURN_IF_ERROR(check.CheckCountsFit(bytes.size() - in.offset()));

  // The blocks, then the trailer.
  for (;;) {
    const size_t offset = in.offset();
    PSTRAIN_ASSIGN_OR_RETURN(const std::string_view record,
                             next(absl::StrCat(check.Where(offset), " or trailer")));
    if (record.size() >= 4 && DecodeFixed32(record.data()) == kTrailerTag) {
      if (record.size() != kTrailerSize) {
        return RowsDataLoss(source, absl::StrCat("its trailer at offset ", offset, " has ",
                                                 record.size(), " bytes, not ", kTrailerSize,
                                                 "; it was not written by RowFileWriter"));
      }
      PSTRAIN_RETURN_IF_ERROR(check.CheckTrailer(record, offset));
      break;
    }
    const std::string where = check.Where(offset);
    if (record.size() < kBlockHeaderSize) {
      return RowsDataLoss(source, absl::StrCat(where, " is malformed: ", record.size(),
                                               " bytes, less than a table and a row count; it "
                                               "was not written by RowFileWriter"));
    }
    uint32_t table = 0;
    uint64_t count = 0;
    PSTRAIN_RETURN_IF_ERROR(check.CheckBlockHeader(record, offset, &table, &count));
    const int64_t row_bytes = check.row_bytes(table);
    const size_t rows_size = record.size() - kBlockHeaderSize;
    if (count > rows_size / row_bytes || rows_size != count * row_bytes) {
      return RowsDataLoss(
          source, absl::StrCat(where, " of table \"", contents->tables[table].name, "\" has ",
                               count, " rows of ", row_bytes, " bytes in ", rows_size,
                               " bytes; it was not written by RowFileWriter"));
    }
    check.Add(table, count, offset_of(record) + kBlockHeaderSize);
  }
  if (in.offset() != bytes.size()) {
    return RowsDataLoss(source, absl::StrCat("has ", bytes.size() - in.offset(),
                                             " bytes after its trailer, at offset ", in.offset()));
  }
  return std::move(check.blocks());
}

}  // namespace

int64_t RowBytes(int64_t dim, int64_t slot_floats, uint32_t version) {
  return static_cast<int64_t>(version >= kVersion ? kRowPrefixSize : kUncountedRowPrefixSize) +
         static_cast<int64_t>(sizeof(float)) * (dim + slot_floats);
}

absl::StatusOr<std::vector<CheckedBlock>> CheckRowFile(std::string_view bytes,
                                                       const std::string& source,
                                                       RowFileContents* contents) {
  if (bytes.empty()) return RowsDataLoss(source, "is empty");
  const size_t magic_seen = std::min(bytes.size(), kMagic.size());
  if (bytes.substr(0, magic_seen) == kMagic.substr(0, magic_seen)) {
    return CheckUnframedFile(bytes, source, contents);
  }
  return CheckFramedFile(bytes, source, contents);
}

}  // namespace row_file
}  // namespace pstrain
