#ifndef PSTRAIN_IO_ROW_CHECKPOINT_H_
#define PSTRAIN_IO_ROW_CHECKPOINT_H_

// Row files: one ps task's rows of every embedding table of a model, written
// beside its dense shard file in the same checkpoint (docs/data-formats.md,
// "Checkpoint files"; io/checkpoint.h names the files), and a click model's
// trained rows in an export. Every integer is little-endian, every float an
// IEEE-754 binary32 little-endian.
//
// Version 3 (what RowFileWriter writes) is a sequence of TFRecord-framed
// records (common/record_format.h), the framing of every other file pstrain
// writes:
//
//   prelude  magic "PSTRROWS" (8 bytes), uint32 version (3)
//   header   int64 global_step, uint32 num_tables, then for each table:
//            uint32 name size, name, uint32 optimizer size, optimizer,
//            int64 dim, int64 slot_floats, int64 rows
//   blocks   each: uint32 table, uint64 count, then `count` rows
//     row    int64 id, int64 last_step (0 for a table without eviction, which
//            keeps none), int64 pushes (how often the row was trained: the
//            pushes of its id; 0: not known), float weights[dim],
//            float slots[slot_floats]
//   trailer  uint32 0xffffffff (where a block's table index would be),
//            uint64 total rows, uint64 blocks, uint32 masked_crc(the header)
//   and nothing after the trailer's record.
//
// Version 2 (read, no longer written) is version 3 without a row's pushes
// (read as 0).
//
// Version 1 (read, no longer written) had the same pieces in a framing of
// its own: the prelude bare with its masked_crc, the header as a length with
// its CRC, the body and its CRC; each block's 12 bytes, their CRC, the rows
// and their CRC; the trailer's 24 bytes and their CRC.
//
// masked_crc is TFRecord's (common/crc32c.h). Blocks go in table order: a
// table's rows fill one or more blocks of at least one row each (none for a
// table without rows), in the order they were added. Every byte is under a
// CRC, and a file cut anywhere lacks its trailer or part of a record. The
// prelude's layout is the same in every framed version, so a reader tells a
// file of another version (InvalidArgument) from a damaged one (DataLoss).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/env.h"

namespace pstrain {
namespace row_file {

inline constexpr std::string_view kMagic = "PSTRROWS";
constexpr uint32_t kVersion = 3;                // what RowFileWriter writes
constexpr uint32_t kUncountedVersion = 2;       // read only: rows without pushes
constexpr uint32_t kUnframedVersion = 1;        // read only
constexpr size_t kPreludeSize = 12;             // magic, version
constexpr size_t kBlockHeaderSize = 12;         // table, count
constexpr size_t kRowPrefixSize = 24;           // id, last_step, pushes
constexpr size_t kUncountedRowPrefixSize = 16;  // versions 1 and 2: id, last_step
constexpr uint32_t kTrailerTag = 0xffffffffu;   // where a block's table index would be
constexpr size_t kTrailerSize = 24;             // tag, rows, blocks, the header's CRC
// Bounds of dim + slot_floats: a table's row is at most 64 MiB.
constexpr int64_t kMaxRowFloats = int64_t{1} << 24;
constexpr uint32_t kMaxTables = uint32_t{1} << 20;
// The writer's blocks hold about this many bytes of rows (at least one row).
constexpr int64_t kDefaultBlockBytes = int64_t{1} << 20;

}  // namespace row_file

// One embedding table of a row file.
struct RowTableHeader {
  std::string name;         // "emb_C1/embeddings"
  int64_t dim = 0;          // weight floats per row, >= 1
  int64_t slot_floats = 0;  // optimizer slot floats per row, >= 0
  std::string optimizer;    // "adagrad", "ftrl", "adam": what the slots mean
};

// What RowFileWriter::Write wrote: the checkpoint's index records the size and
// CRC; pstrain-ckpt shows the rows and norms.
struct RowFileSummary {
  uint64_t size_bytes = 0;
  uint32_t crc32c = 0;              // of the whole file
  std::vector<int64_t> rows;        // per table
  std::vector<double> sum_squares;  // per table: of the weights (not the slots)
};

// Collects the rows of a ps task's tables and writes them as one row file.
// Holds every row added, encoded as in the file (in blocks of about
// `block_bytes`), so its memory is about the file's size. Not thread-safe.
class RowFileWriter {
 public:
  // CHECK-fails (programmer errors) for more than row_file::kMaxTables tables,
  // or a table with dim < 1, slot_floats < 0, dim + slot_floats >
  // row_file::kMaxRowFloats or an empty or repeated name.
  explicit RowFileWriter(std::vector<RowTableHeader> tables,
                         int64_t block_bytes = row_file::kDefaultBlockBytes);
  RowFileWriter(const RowFileWriter&) = delete;
  RowFileWriter& operator=(const RowFileWriter&) = delete;

  // Appends one row of table `table` (an index into the constructor's
  // tables). CHECK-fails unless weights has dim floats and slots slot_floats.
  // Ids are not checked for repeats: ForEachRow of one table gives each once.
  // `pushes`: how often the row was trained (0: not known).
  void Add(int table, int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
           int64_t last_step, int64_t pushes = 0);

  const std::vector<RowTableHeader>& tables() const { return headers_; }
  int64_t rows(int table) const { return tables_[table].rows; }

  // Writes the file to `path` through `env`: a temp file beside it, fsync,
  // rename, so a crash leaves the old file or the whole new one. May be called
  // again (the same rows, another path or step). InvalidArgument for a
  // negative `global_step`; the Env's error if writing fails (the temp file is
  // deleted).
  absl::StatusOr<RowFileSummary> Write(Env* env, const std::string& path,
                                       int64_t global_step) const;

 private:
  struct Block {
    int64_t rows = 0;
    std::string bytes;  // the block's record data: table, count, rows
  };
  struct Table {
    int64_t row_bytes = 0;
    int64_t rows_per_block = 0;
    int64_t rows = 0;
    double sum_squares = 0;
    std::vector<Block> blocks;
  };

  // Hands the file's bytes to `out` in order.
  absl::Status Emit(int64_t global_step,
                    absl::FunctionRef<absl::Status(std::string_view)> out) const;

  const std::vector<RowTableHeader> headers_;
  std::vector<Table> tables_;
};

// What a row file holds besides its rows.
struct RowFileContents {
  uint32_t version = 0;  // the file's format version
  std::vector<RowTableHeader> tables;
  std::vector<int64_t> rows;  // per table
  int64_t global_step = 0;
};

// Called for every row of a file: the table's index in the file's
// RowFileContents::tables (the order of the writer's tables), and the row as
// RowFileWriter::Add took it (`pushes` 0 in a file of a version before 3). The spans are valid only
// during the call. An error stops the reading and is returned as it is.
using RowFileVisitor = absl::FunctionRef<absl::Status(
    int table, int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
    int64_t last_step, int64_t pushes)>;
// Called once, after the whole file is checked and before its first row: the
// file's tables (to map them to the model's and check their optimizer before
// any row is taken). An error stops the reading and is returned as it is.
using RowFileTablesVisitor = absl::FunctionRef<absl::Status(const RowFileContents& contents)>;

// Reads a row file: checks the magic, the version, every size and every CRC
// of the whole file first, then calls `fn` for every row in file order (table
// by table, each table's rows in the order they were added). So `fn` sees no
// row of a damaged file; it may still see some rows before one of its own
// calls fails, and then the caller discards what it took. DataLoss naming the
// path and the offset for a truncated, damaged or malformed file (or one that
// is no row file); InvalidArgument for a file of another format version;
// NotFound for a missing file. Ids, steps and values are passed as stored:
// the caller checks them (EmbeddingTable::InsertRow refuses bad ids,
// non-finite values and repeated ids). Memory: about the file's size (the
// bytes, and a list of its blocks).
absl::StatusOr<RowFileContents> ReadRowFile(Env* env, const std::string& path, RowFileVisitor fn);
absl::StatusOr<RowFileContents> ReadRowFile(Env* env, const std::string& path,
                                            RowFileTablesVisitor on_tables, RowFileVisitor fn);

// The same for a file already read: `source` names it in errors. For the
// fuzzer, and for callers that read the file themselves (e.g. to check its
// size and CRC against the checkpoint's index first).
absl::StatusOr<RowFileContents> ParseRowFile(std::string_view bytes, const std::string& source,
                                             RowFileVisitor fn);
absl::StatusOr<RowFileContents> ParseRowFile(std::string_view bytes, const std::string& source,
                                             RowFileTablesVisitor on_tables, RowFileVisitor fn);

}  // namespace pstrain

#endif  // PSTRAIN_IO_ROW_CHECKPOINT_H_
