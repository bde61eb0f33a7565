#include "io/row_checkpoint.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/env.h"
#include "common/record_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kPath[] = "/job/model.ckpt-7.rows-0-of-2";

// A row as the visitor saw it.
struct Row {
  int table = 0;
  int64_t id = 0;
  std::vector<float> weights;
  std::vector<float> slots;
  int64_t last_step = 0;
  bool operator==(const Row&) const = default;
};

std::vector<RowTableHeader> ThreeTables() {
  return {{"emb_C1/embeddings", 4, 4, "adagrad"},
          {"emb_C2/embeddings", 2, 4, "ftrl"},
          {"emb_C3/embeddings", 3, 7, "adam"}};
}

// Values that differ for every (table, id, index), so a misplaced float shows.
std::vector<float> Values(int table, int64_t id, int64_t n, float base) {
  std::vector<float> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(base + 100.0f * table + 0.5f * id - 0.125f * k);
  return v;
}

Row MakeRow(const std::vector<RowTableHeader>& tables, int table, int64_t id) {
  return {table, id, Values(table, id, tables[table].dim, 1.0f),
          Values(table, id, tables[table].slot_floats, 0.25f), 1000 + id};
}

void AddRow(RowFileWriter& writer, const Row& row) {
  writer.Add(row.table, row.id, row.weights, row.slots, row.last_step);
}

// 5 rows of table 0 and 3 of table 1 added interleaved; table 2 has none.
// Returns the rows in file order (table by table, in the order added).
std::vector<Row> AddRows(RowFileWriter& writer) {
  std::vector<Row> table0, table1;
  for (int64_t i = 0; i < 5; ++i) {
    table0.push_back(MakeRow(writer.tables(), 0, 10 * i + 3));
    AddRow(writer, table0.back());
    if (i < 3) {
      table1.push_back(MakeRow(writer.tables(), 1, -1 - i));
      AddRow(writer, table1.back());
    }
  }
  table0.insert(table0.end(), table1.begin(), table1.end());
  return table0;
}

// A small file of three tables, in blocks of two rows.
std::string SmallFile() {
  RowFileWriter writer(ThreeTables(), /*block_bytes=*/100);
  AddRows(writer);
  MemEnv env;
  EXPECT_TRUE(writer.Write(&env, kPath, 7).ok());
  return *env.ReadFile(kPath);
}

struct Parsed {
  absl::StatusOr<RowFileContents> contents;
  std::vector<Row> rows;
};

Parsed Parse(std::string_view bytes) {
  Parsed p;
  p.contents = ParseRowFile(
      bytes, kPath,
      [&](int table, int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
          int64_t last_step) {
        p.rows.push_back(
            {table, id, {weights.begin(), weights.end()}, {slots.begin(), slots.end()}, last_step});
        return absl::OkStatus();
      });
  return p;
}

std::string Message(const Parsed& p) { return std::string(p.contents.status().message()); }

// The format note of row_checkpoint.h, spelled out apart from the writer.
std::string U32(uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}
std::string U64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}
std::string Crc(const std::string& data) {
  return U32(crc32c::Mask(crc32c::Value(data.data(), data.size())));
}
std::string Prelude(uint32_t version) {
  const std::string p = "PSTRROWS" + U32(version);
  return p + Crc(p);
}
struct HandTable {
  std::string name;
  std::string optimizer;
  uint64_t dim = 0;
  uint64_t slot_floats = 0;
  uint64_t rows = 0;
};
std::string Body(uint64_t global_step, const std::vector<HandTable>& tables,
                 uint32_t num_tables_written = 0xffffffffu) {
  std::string b = U64(global_step);
  b += U32(num_tables_written == 0xffffffffu ? tables.size() : num_tables_written);
  for (const HandTable& t : tables) {
    b += U32(t.name.size()) + t.name + U32(t.optimizer.size()) + t.optimizer;
    b += U64(t.dim) + U64(t.slot_floats) + U64(t.rows);
  }
  return b;
}
std::string Header(const std::string& body) {
  return U64(body.size()) + Crc(U64(body.size())) + body + Crc(body);
}
std::string EncodeRow(const Row& row) {
  std::string s = U64(row.id) + U64(row.last_step);
  for (const auto* v : {&row.weights, &row.slots}) {
    for (float f : *v) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      s += U32(bits);
    }
  }
  return s;
}
std::string Block(uint32_t table, uint64_t count, const std::string& rows) {
  const std::string h = U32(table) + U64(count);
  return h + Crc(h) + rows + Crc(rows);
}
std::string Trailer(uint64_t rows, uint64_t blocks, const std::string& body) {
  const std::string t = U32(0xffffffffu) + U64(rows) + U64(blocks) + Crc(body);
  return t + Crc(t);
}

TEST(RowCheckpointTest, RoundTripsThreeTablesOneWithoutRows) {
  RowFileWriter writer(ThreeTables());
  const std::vector<Row> want = AddRows(writer);
  EXPECT_EQ(writer.rows(0), 5);
  EXPECT_EQ(writer.rows(2), 0);
  MemEnv env;
  absl::StatusOr<RowFileSummary> summary = writer.Write(&env, kPath, 7);
  ASSERT_TRUE(summary.ok()) << summary.status();
  // Written through a temp file that is gone.
  EXPECT_THAT(*env.ListDir("/job"), ElementsAre("model.ckpt-7.rows-0-of-2"));

  const std::string bytes = *env.ReadFile(kPath);
  EXPECT_EQ(summary->size_bytes, bytes.size());
  EXPECT_EQ(summary->crc32c, crc32c::Value(bytes.data(), bytes.size()));
  EXPECT_THAT(summary->rows, ElementsAre(5, 3, 0));
  std::vector<double> sum_squares(3, 0.0);
  for (const Row& r : want) {
    for (float w : r.weights) sum_squares[r.table] += static_cast<double>(w) * w;
  }
  ASSERT_EQ(summary->sum_squares.size(), 3u);
  for (int t = 0; t < 3; ++t) EXPECT_DOUBLE_EQ(summary->sum_squares[t], sum_squares[t]) << t;
  EXPECT_GT(sum_squares[0], 0.0);
  EXPECT_EQ(summary->sum_squares[2], 0.0);

  std::vector<Row> got;
  absl::StatusOr<RowFileContents> contents = ReadRowFile(
      &env, kPath,
      [&](int table, int64_t id, absl::Span<const float> weights, absl::Span<const float> slots,
          int64_t last_step) {
        got.push_back(
            {table, id, {weights.begin(), weights.end()}, {slots.begin(), slots.end()}, last_step});
        return absl::OkStatus();
      });
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->global_step, 7);
  EXPECT_THAT(contents->rows, ElementsAre(5, 3, 0));
  const std::vector<RowTableHeader> tables = ThreeTables();
  ASSERT_EQ(contents->tables.size(), tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    EXPECT_EQ(contents->tables[t].name, tables[t].name);
    EXPECT_EQ(contents->tables[t].dim, tables[t].dim);
    EXPECT_EQ(contents->tables[t].slot_floats, tables[t].slot_floats);
    EXPECT_EQ(contents->tables[t].optimizer, tables[t].optimizer);
  }
  EXPECT_EQ(got, want);
}

TEST(RowCheckpointTest, SmallBlocksRoundTripAndAnotherStep) {
  for (int64_t block_bytes : {int64_t{1}, int64_t{100}, int64_t{1} << 20}) {
    RowFileWriter writer(ThreeTables(), block_bytes);
    const std::vector<Row> want = AddRows(writer);
    MemEnv env;
    ASSERT_TRUE(writer.Write(&env, "/a", 7).ok());
    ASSERT_TRUE(writer.Write(&env, "/b", 9).ok());  // again: the same rows
    for (const auto& [path, step] : {std::pair{"/a", 7}, std::pair{"/b", 9}}) {
      Parsed p = Parse(*env.ReadFile(path));
      ASSERT_TRUE(p.contents.ok()) << p.contents.status();
      EXPECT_EQ(p.contents->global_step, step);
      EXPECT_EQ(p.rows, want) << block_bytes;
    }
  }
}

TEST(RowCheckpointTest, BytesAreThoseOfTheFormatNote) {
  const std::vector<RowTableHeader> tables = {{"a", 1, 1, "adagrad"}, {"bb", 2, 0, "sgd"}};
  RowFileWriter writer(tables, /*block_bytes=*/48);  // rows of 24 bytes: two a block
  const std::vector<Row> rows = {{0, 5, {1.5f}, {0.25f}, 3},
                                 {0, -6, {2.5f}, {0.5f}, 4},
                                 {1, 1 << 30, {-1, 2}, {}, 9},
                                 {0, 7, {3.5f}, {0.75f}, 5}};
  for (const Row& r : rows) AddRow(writer, r);
  MemEnv env;
  ASSERT_TRUE(writer.Write(&env, "/f", 42).ok());

  const std::string body = Body(42, {{"a", "adagrad", 1, 1, 3}, {"bb", "sgd", 2, 0, 1}});
  const std::string want =
      Prelude(1) + Header(body) + Block(0, 2, EncodeRow(rows[0]) + EncodeRow(rows[1])) +
      Block(0, 1, EncodeRow(rows[3])) + Block(1, 1, EncodeRow(rows[2])) + Trailer(4, 3, body);
  EXPECT_EQ(*env.ReadFile("/f"), want);
}

TEST(RowCheckpointTest, NoTablesAtAll) {
  RowFileWriter writer({});
  MemEnv env;
  absl::StatusOr<RowFileSummary> summary = writer.Write(&env, "/f", 0);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->rows.empty());
  Parsed p = Parse(*env.ReadFile("/f"));
  ASSERT_TRUE(p.contents.ok()) << p.contents.status();
  EXPECT_TRUE(p.contents->tables.empty());
  EXPECT_TRUE(p.rows.empty());
}

TEST(RowCheckpointTest, EveryTruncationIsDataLossAndVisitsNothing) {
  const std::string bytes = SmallFile();
  ASSERT_TRUE(Parse(bytes).contents.ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Parsed p = Parse(std::string_view(bytes).substr(0, n));
    ASSERT_TRUE(absl::IsDataLoss(p.contents.status())) << n << ": " << p.contents.status();
    EXPECT_THAT(Message(p), HasSubstr(kPath));
    EXPECT_TRUE(p.rows.empty()) << n;
  }
}

TEST(RowCheckpointTest, EveryByteIsUnderACrc) {
  const std::string bytes = SmallFile();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ flip);
      Parsed p = Parse(damaged);
      ASSERT_TRUE(absl::IsDataLoss(p.contents.status()))
          << "byte " << i << " ^ " << int{flip} << ": " << p.contents.status();
      EXPECT_THAT(Message(p), HasSubstr(kPath));
      EXPECT_TRUE(p.rows.empty()) << i;
    }
  }
}

TEST(RowCheckpointTest, MessagesSayWhatAndWhere) {
  const std::string bytes = SmallFile();
  std::string damaged = bytes;
  // Inside the rows of the last block (table 1's third row: 40 bytes, its
  // CRC, the 28-byte trailer).
  damaged[bytes.size() - 40] ^= 1;
  EXPECT_THAT(Message(Parse(damaged)),
              HasSubstr("(table \"emb_C2/embeddings\") are damaged: CRC mismatch"));
  EXPECT_THAT(Message(Parse(bytes + "x")), HasSubstr("has 1 bytes after its trailer"));
  EXPECT_THAT(Message(Parse(bytes.substr(0, bytes.size() - 28))),
              HasSubstr("before its trailer (truncated)"));
  EXPECT_THAT(Message(Parse("hello")), HasSubstr("is not a row checkpoint file"));
  EXPECT_TRUE(absl::IsDataLoss(Parse("").contents.status()));
  EXPECT_TRUE(absl::IsDataLoss(Parse(RecordWriter::Frame("a TFRecord")).contents.status()));
}

TEST(RowCheckpointTest, AnotherVersionIsInvalidArgument) {
  const std::string rest = SmallFile().substr(16);
  for (uint32_t version : {0u, 2u, 0x01000001u}) {
    Parsed p = Parse(Prelude(version) + rest);
    EXPECT_TRUE(absl::IsInvalidArgument(p.contents.status())) << p.contents.status();
    EXPECT_THAT(Message(p), HasSubstr(absl::StrCat("format version ", version,
                                                   "; this pstrain reads version 1")));
    EXPECT_TRUE(p.rows.empty());
  }
  EXPECT_TRUE(Parse(Prelude(1) + rest).contents.ok());
}

// Files with valid CRCs (a bad writer, or a forged file) whose counts the
// bytes cannot hold: refused before anything is allocated for them (an
// allocation of such a size would throw or abort the test).
TEST(RowCheckpointTest, HugeCountsAreRefusedWithoutAllocating) {
  const Row row = {0, 1, {2.0f}, {}, 3};
  auto file = [&](const std::string& body, uint64_t count) {
    return Prelude(1) + Header(body) + Block(0, count, EncodeRow(row)) + Trailer(1, 1, body);
  };
  const std::string valid = file(Body(1, {{"t", "sgd", 1, 0, 1}}), 1);
  ASSERT_TRUE(Parse(valid).contents.ok()) << Parse(valid).contents.status();

  struct Case {
    std::string bytes;
    std::string message;
  };
  const uint64_t huge = uint64_t{1} << 62;
  const std::vector<Case> cases = {
      {Prelude(1) + U64(huge) + Crc(U64(huge)) + "xxxx", "has 4611686018427387904 bytes"},
      {file(Body(1, {{"t", "sgd", 1, 0, 1}}, 0xfffffff0u), 1), "4294967280 tables in 36 bytes"},
      {file(U64(1) + U32(1) + U32(0xffffffffu) + "t" + std::string(40, 'x'), 1),
       "the name of table 0 is cut"},
      {file(Body(1, {{"t", "sgd", 1, 0, huge}}), 1), "has 4611686018427387904 rows of 20 bytes"},
      {file(Body(1, {{"t", "sgd", uint64_t{1} << 40, 0, 1}}), 1), "has dim 1099511627776"},
      {file(Body(1, {{"t", "sgd", 1, ~uint64_t{0}, 1}}), 1), "has dim 1, -1 slot floats"},
      {file(Body(1, {{"t", "sgd", 1 << 24, 1 << 24, 0}}), 1), "has dim 16777216, 16777216"},
      {file(Body(1, {{"t", "sgd", 1, 0, 1}}), huge),
       "it holds 4611686018427387904 rows of table \"t\"; the header leaves 1 of its 1"},
      // The header allows 3 rows (the bytes after it could hold them); the
      // block claims them but holds one.
      {file(Body(1, {{"t", "sgd", 1, 0, 3}}), 3), "has 3 rows of 20 bytes and a CRC, only 52"},
      {file(Body(1, {{"t", "sgd", 1, 0, 1}}), 0), "is malformed: it holds 0 rows of table \"t\""},
      {file(Body(-1, {{"t", "sgd", 1, 0, 1}}), 1), "global step -1"},
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.bytes);
    EXPECT_TRUE(absl::IsDataLoss(p.contents.status())) << p.contents.status();
    EXPECT_THAT(Message(p), HasSubstr(c.message));
    EXPECT_TRUE(p.rows.empty());
  }
}

TEST(RowCheckpointTest, MalformedHeadersAndBlocksWithValidCrcs) {
  const Row row = {0, 1, {2.0f}, {}, 3};
  const std::string one = EncodeRow(row);
  const std::string body = Body(1, {{"t", "sgd", 1, 0, 1}, {"u", "sgd", 1, 0, 1}});
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Prelude(1) + Header(Body(1, {{"t", "sgd", 1, 0, 0}, {"t", "sgd", 1, 0, 0}})) +
           Trailer(0, 0, Body(1, {{"t", "sgd", 1, 0, 0}, {"t", "sgd", 1, 0, 0}})),
       "empty or repeated name \"t\""},
      {Prelude(1) + Header(Body(1, {}) + "z") + Trailer(0, 0, Body(1, {}) + "z"),
       "1 bytes follow the last table"},
      {Prelude(1) + Header(body) + Block(1, 1, one) + Block(0, 1, one) + Trailer(2, 2, body),
       "block 1 at offset 156 is malformed: it is of table 0 but follows a block of table 1"},
      {Prelude(1) + Header(body) + Block(2, 1, one) + Trailer(1, 1, body),
       "it names table 2; the header has 2 tables"},
      {Prelude(1) + Header(body) + Block(0, 1, one) + Trailer(1, 1, body),
       "table \"u\" has 0 rows in blocks before its trailer at offset 156; its header says 1"},
      {Prelude(1) + Header(body) + Block(0, 1, one) + Block(1, 1, one) + Trailer(2, 3, body),
       "its trailer at offset 196 counts 2 rows in 3 blocks; the file has 2 in 2"},
      {Prelude(1) + Header(body) + Block(0, 1, one) + Block(1, 1, one) +
           Trailer(2, 2, Body(2, {{"t", "sgd", 1, 0, 1}, {"u", "sgd", 1, 0, 1}})),
       "its trailer at offset 196 is of another file's header (files spliced)"},
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.bytes);
    EXPECT_TRUE(absl::IsDataLoss(p.contents.status())) << p.contents.status();
    EXPECT_THAT(Message(p), HasSubstr(c.message));
    EXPECT_TRUE(p.rows.empty());
  }
  EXPECT_TRUE(
      Parse(Prelude(1) + Header(body) + Block(0, 1, one) + Block(1, 1, one) + Trailer(2, 2, body))
          .contents.ok());
}

TEST(RowCheckpointTest, AVisitorErrorStopsTheReading) {
  const std::string bytes = SmallFile();
  int calls = 0;
  absl::StatusOr<RowFileContents> contents =
      ParseRowFile(bytes, kPath, [&](int, int64_t, auto, auto, int64_t) {
        return ++calls == 2 ? absl::AlreadyExistsError("row 2 again") : absl::OkStatus();
      });
  EXPECT_EQ(contents.status(), absl::AlreadyExistsError("row 2 again"));
  EXPECT_EQ(calls, 2);
}

TEST(RowCheckpointTest, TheTablesComeBeforeTheFirstRow) {
  const std::string bytes = SmallFile();
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic(kPath, bytes).ok());
  int tables_calls = 0, rows_before_tables = 0, rows = 0;
  absl::StatusOr<RowFileContents> contents = ReadRowFile(
      &env, kPath,
      [&](const RowFileContents& c) {
        ++tables_calls;
        rows_before_tables = rows;
        EXPECT_EQ(c.tables.size(), 3u);
        EXPECT_EQ(c.tables[1].optimizer, "ftrl");
        EXPECT_THAT(c.rows, ElementsAre(5, 3, 0));
        EXPECT_EQ(c.global_step, 7);
        return absl::OkStatus();
      },
      [&](int, int64_t, auto, auto, int64_t) {
        ++rows;
        return absl::OkStatus();
      });
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(tables_calls, 1);
  EXPECT_EQ(rows_before_tables, 0);
  EXPECT_EQ(rows, 8);

  // An error there stops the reading before any row.
  rows = 0;
  contents = ParseRowFile(
      bytes, kPath,
      [](const RowFileContents&) { return absl::InvalidArgumentError("adam, not ftrl"); },
      [&](int, int64_t, auto, auto, int64_t) {
        ++rows;
        return absl::OkStatus();
      });
  EXPECT_EQ(contents.status(), absl::InvalidArgumentError("adam, not ftrl"));
  EXPECT_EQ(rows, 0);

  // Nor is it called for a damaged file.
  contents = ParseRowFile(
      bytes.substr(0, bytes.size() - 1), kPath,
      [&](const RowFileContents&) {
        ++tables_calls;
        return absl::OkStatus();
      },
      [](int, int64_t, auto, auto, int64_t) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsDataLoss(contents.status()));
  EXPECT_EQ(tables_calls, 1);
}

TEST(RowCheckpointTest, MissingFileIsNotFound) {
  MemEnv env;
  absl::StatusOr<RowFileContents> contents = ReadRowFile(
      &env, "/nothing", [](int, int64_t, auto, auto, int64_t) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsNotFound(contents.status())) << contents.status();
}

TEST(RowCheckpointTest, NegativeGlobalStepIsRefused) {
  RowFileWriter writer(ThreeTables());
  MemEnv env;
  EXPECT_TRUE(absl::IsInvalidArgument(writer.Write(&env, "/f", -1).status()));
  EXPECT_FALSE(env.FileExists("/f"));
}

TEST(RowCheckpointDeathTest, WrongRowSizesAreProgrammerErrors) {
  RowFileWriter writer(ThreeTables());
  const std::vector<float> four(4), three(3);
  EXPECT_DEATH(writer.Add(0, 1, three, four, 0), "weights of a row of emb_C1");
  EXPECT_DEATH(writer.Add(0, 1, four, three, 0), "slots of a row of emb_C1");
  EXPECT_DEATH(writer.Add(3, 1, four, four, 0), "no table 3");
  const std::vector<RowTableHeader> repeated = {{"a", 1, 0, ""}, {"a", 1, 0, ""}};
  EXPECT_DEATH(RowFileWriter{repeated}, "distinct names");
}

}  // namespace
}  // namespace pstrain
