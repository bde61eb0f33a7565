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
  int64_t pushes = 0;
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
  return {table,
          id,
          Values(table, id, tables[table].dim, 1.0f),
          Values(table, id, tables[table].slot_floats, 0.25f),
          1000 + id,
          2000 + 3 * id};
}

void AddRow(RowFileWriter& writer, const Row& row) {
  writer.Add(row.table, row.id, row.weights, row.slots, row.last_step, row.pushes);
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

// A visitor that keeps every row it is handed in `rows`.
auto Collect(std::vector<Row>* rows) {
  return [rows](int table, int64_t id, absl::Span<const float> weights,
                absl::Span<const float> slots, int64_t last_step, int64_t pushes) {
    rows->push_back({table,
                     id,
                     {weights.begin(), weights.end()},
                     {slots.begin(), slots.end()},
                     last_step,
                     pushes});
    return absl::OkStatus();
  };
}

Parsed Parse(std::string_view bytes) {
  Parsed p;
  p.contents = ParseRowFile(bytes, kPath, Collect(&p.rows));
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
// The pieces of a file of any version (row_checkpoint.h): version 1 has
// its own framing, versions 2 and 3 TFRecord's; version 3's rows hold their
// pushes.
std::string Framed(const std::string& data) {
  return U64(data.size()) + Crc(U64(data.size())) + data + Crc(data);
}
std::string Prelude(uint32_t version, int framing = 2) {
  const std::string p = "PSTRROWS" + U32(version);
  return framing == 1 ? p + Crc(p) : Framed(p);
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
std::string Header(const std::string& body, int version = 2) {
  return version == 1 ? U64(body.size()) + Crc(U64(body.size())) + body + Crc(body) : Framed(body);
}
std::string EncodeRow(const Row& row, int version = 2) {
  std::string s = U64(row.id) + U64(row.last_step) + (version >= 3 ? U64(row.pushes) : "");
  for (const auto* v : {&row.weights, &row.slots}) {
    for (float f : *v) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      s += U32(bits);
    }
  }
  return s;
}
std::string Block(uint32_t table, uint64_t count, const std::string& rows, int version = 2) {
  const std::string h = U32(table) + U64(count);
  return version == 1 ? h + Crc(h) + rows + Crc(rows) : Framed(h + rows);
}
std::string Trailer(uint64_t rows, uint64_t blocks, const std::string& body, int version = 2) {
  const std::string t = U32(0xffffffffu) + U64(rows) + U64(blocks) + Crc(body);
  return version == 1 ? t + Crc(t) : Framed(t);
}

// SmallFile's rows as a file of version 1 (what pstrain wrote before
// version 2) or 2 (before version 3).
std::string SmallFileOfVersion(int version) {
  RowFileWriter writer(ThreeTables());
  const std::vector<Row> rows = AddRows(writer);  // 5 of table 0, then 3 of table 1
  const std::string body = Body(7, {{"emb_C1/embeddings", "adagrad", 4, 4, 5},
                                    {"emb_C2/embeddings", "ftrl", 2, 4, 3},
                                    {"emb_C3/embeddings", "adam", 3, 7, 0}});
  std::string file = Prelude(version, version) + Header(body, version);
  // Blocks of two rows, as SmallFile's 100 bytes give.
  for (size_t first : {0, 2, 4, 5, 7}) {
    const size_t end = first == 4 ? 5 : std::min<size_t>(first + 2, 8);
    std::string encoded;
    for (size_t r = first; r < end; ++r) encoded += EncodeRow(rows[r]);
    file += Block(rows[first].table, end - first, encoded, version);
  }
  return file + Trailer(8, 5, body, version);
}
std::string SmallFileVersion1() { return SmallFileOfVersion(1); }

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
  absl::StatusOr<RowFileContents> contents = ReadRowFile(&env, kPath, Collect(&got));
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
  RowFileWriter writer(tables, /*block_bytes=*/64);  // rows of 32 bytes: two a block
  const std::vector<Row> rows = {{0, 5, {1.5f}, {0.25f}, 3, 11},
                                 {0, -6, {2.5f}, {0.5f}, 4, 0},
                                 {1, 1 << 30, {-1, 2}, {}, 9, int64_t{1} << 40},
                                 {0, 7, {3.5f}, {0.75f}, 5, 1}};
  for (const Row& r : rows) AddRow(writer, r);
  MemEnv env;
  ASSERT_TRUE(writer.Write(&env, "/f", 42).ok());

  const std::string body = Body(42, {{"a", "adagrad", 1, 1, 3}, {"bb", "sgd", 2, 0, 1}});
  const std::string want =
      Prelude(3) + Header(body) + Block(0, 2, EncodeRow(rows[0], 3) + EncodeRow(rows[1], 3)) +
      Block(0, 1, EncodeRow(rows[3], 3)) + Block(1, 1, EncodeRow(rows[2], 3)) + Trailer(4, 3, body);
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

// Files of versions 1 and 2 read as before, their rows' pushes 0 (not known).
TEST(RowCheckpointTest, VersionOneAndTwoFilesReadAsBefore) {
  RowFileWriter writer(ThreeTables());
  std::vector<Row> want = AddRows(writer);
  for (Row& row : want) row.pushes = 0;
  for (int version : {1, 2}) {
    const std::string old = SmallFileOfVersion(version);
    ASSERT_NE(old, SmallFile());
    Parsed p = Parse(old);
    ASSERT_TRUE(p.contents.ok()) << p.contents.status();
    EXPECT_EQ(p.contents->version, static_cast<uint32_t>(version));
    EXPECT_EQ(p.contents->global_step, 7);
    EXPECT_THAT(p.contents->rows, ElementsAre(5, 3, 0));
    ASSERT_EQ(p.contents->tables.size(), 3u);
    EXPECT_EQ(p.contents->tables[2].optimizer, "adam");
    EXPECT_EQ(p.contents->tables[2].slot_floats, 7);
    EXPECT_EQ(p.rows, want) << "version " << version;
  }
  EXPECT_EQ(Parse(SmallFile()).contents->version, 3u);
}

TEST(RowCheckpointTest, EveryTruncationIsDataLossAndVisitsNothing) {
  for (const std::string& bytes : {SmallFile(), SmallFileVersion1(), SmallFileOfVersion(2)}) {
    ASSERT_TRUE(Parse(bytes).contents.ok());
    for (size_t n = 0; n < bytes.size(); ++n) {
      Parsed p = Parse(std::string_view(bytes).substr(0, n));
      ASSERT_TRUE(absl::IsDataLoss(p.contents.status())) << n << ": " << p.contents.status();
      EXPECT_THAT(Message(p), HasSubstr(kPath));
      EXPECT_TRUE(p.rows.empty()) << n;
    }
  }
}

TEST(RowCheckpointTest, EveryByteIsUnderACrc) {
  for (const std::string& bytes : {SmallFile(), SmallFileVersion1()}) {
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
}

TEST(RowCheckpointTest, MessagesSayWhatAndWhere) {
  const std::string bytes = SmallFile();
  std::string damaged = bytes;
  // Inside the rows of the last block (table 1's third row: 48 bytes, its
  // record's CRC, the trailer's 40-byte record).
  const size_t last_block = bytes.size() - 48 - 4 - 40 - 12 - 12;
  damaged[bytes.size() - 50] ^= 1;
  EXPECT_THAT(Message(Parse(damaged)),
              HasSubstr(absl::StrCat("record at offset ", last_block, " has corrupted data")));
  EXPECT_THAT(Message(Parse(bytes + "x")), HasSubstr("has 1 bytes after its trailer"));
  EXPECT_THAT(
      Message(Parse(bytes.substr(0, bytes.size() - 40))),
      HasSubstr(absl::StrCat("ends at offset ", bytes.size() - 40, " before its block 7 at offset ",
                             bytes.size() - 40, " or trailer (truncated)")));
  EXPECT_THAT(Message(Parse("hello")), HasSubstr("is not a row checkpoint file"));
  EXPECT_THAT(Message(Parse(RecordWriter::Frame("a TFRecord"))),
              HasSubstr("is not a row checkpoint file"));
  EXPECT_THAT(Message(Parse(RecordWriter::Frame("PSTRROWSabcd") + bytes.substr(28))),
              HasSubstr("format version 1684234849"));
  EXPECT_TRUE(absl::IsDataLoss(Parse("").contents.status()));

  // Version 1's framing says more of where the damage is.
  const std::string v1 = SmallFileVersion1();
  damaged = v1;
  damaged[v1.size() - 40] ^= 1;  // the last row (40 bytes), its CRC, the 28-byte trailer
  EXPECT_THAT(Message(Parse(damaged)),
              HasSubstr("(table \"emb_C2/embeddings\") are damaged: CRC mismatch"));
  EXPECT_THAT(Message(Parse(v1 + "x")), HasSubstr("has 1 bytes after its trailer"));
  EXPECT_THAT(Message(Parse(v1.substr(0, v1.size() - 28))),
              HasSubstr("before its trailer (truncated)"));
}

TEST(RowCheckpointTest, AnotherVersionIsInvalidArgument) {
  const std::string rest = SmallFile().substr(28);
  const std::string rest1 = SmallFileVersion1().substr(16);
  for (uint32_t version : {0u, 4u, 0x01000001u}) {
    for (const std::string& file : {Prelude(version) + rest, Prelude(version, 1) + rest1}) {
      Parsed p = Parse(file);
      EXPECT_TRUE(absl::IsInvalidArgument(p.contents.status())) << p.contents.status();
      EXPECT_THAT(Message(p), HasSubstr(absl::StrCat("format version ", version,
                                                     "; this pstrain reads versions 1 to 3")));
      EXPECT_TRUE(p.rows.empty());
    }
  }
  EXPECT_TRUE(Parse(Prelude(3) + rest).contents.ok());
  EXPECT_TRUE(Parse(Prelude(2) + SmallFileOfVersion(2).substr(28)).contents.ok());
  EXPECT_TRUE(Parse(Prelude(1, 1) + rest1).contents.ok());
  // Version 2 or 3 unframed, or 1 framed, is no file pstrain wrote.
  for (uint32_t framed : {2u, 3u}) {
    EXPECT_THAT(Message(Parse(Prelude(framed, 1) + rest1)),
                HasSubstr(absl::StrCat("its unframed prelude says version ", framed)));
  }
  EXPECT_TRUE(absl::IsDataLoss(Parse(Prelude(1) + rest).contents.status()));
  EXPECT_THAT(Message(Parse(Prelude(1) + rest)), HasSubstr("its framed prelude says version 1"));
  // A damaged record says what the file holds there.
  std::string damaged = SmallFile();
  damaged[28 + 12 + 3] ^= 1;  // in the header's data
  EXPECT_THAT(Message(Parse(damaged)),
              HasSubstr("record at offset 28 has corrupted data (CRC mismatch) (its header)"));
}

// Files with valid CRCs (a bad writer, or a forged file) whose counts the
// bytes cannot hold: refused before anything is allocated for them (an
// allocation of such a size would throw or abort the test).
TEST(RowCheckpointTest, HugeCountsAreRefusedWithoutAllocating) {
  const Row row = {0, 1, {2.0f}, {}, 3};
  for (int v : {1, 2}) {
    auto file = [&](const std::string& body, uint64_t count) {
      return Prelude(v, v) + Header(body, v) + Block(0, count, EncodeRow(row), v) +
             Trailer(1, 1, body, v);
    };
    const std::string valid = file(Body(1, {{"t", "sgd", 1, 0, 1}}), 1);
    ASSERT_TRUE(Parse(valid).contents.ok()) << Parse(valid).contents.status();

    struct Case {
      std::string bytes;
      std::string message;
    };
    const uint64_t huge = uint64_t{1} << 62;
    const std::vector<Case> cases = {
        {Prelude(v, v) + U64(huge) + Crc(U64(huge)) + "xxxx",
         v == 1 ? "has 4611686018427387904 bytes" : "of 4611686018427387904 bytes is cut short"},
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
        {file(Body(1, {{"t", "sgd", 1, 0, 3}}), 3),
         v == 1 ? "has 3 rows of 20 bytes and a CRC, only 52" : "has 3 rows of 20 bytes in 20"},
        {file(Body(1, {{"t", "sgd", 1, 0, 1}}), 0), "is malformed: it holds 0 rows of table \"t\""},
        {file(Body(-1, {{"t", "sgd", 1, 0, 1}}), 1), "global step -1"},
    };
    for (const Case& c : cases) {
      Parsed p = Parse(c.bytes);
      EXPECT_TRUE(absl::IsDataLoss(p.contents.status())) << p.contents.status();
      EXPECT_THAT(Message(p), HasSubstr(c.message)) << "version " << v;
      EXPECT_TRUE(p.rows.empty());
    }
  }
}

TEST(RowCheckpointTest, MalformedHeadersAndBlocksWithValidCrcs) {
  const Row row = {0, 1, {2.0f}, {}, 3};
  const std::string one = EncodeRow(row);
  const std::string body = Body(1, {{"t", "sgd", 1, 0, 1}, {"u", "sgd", 1, 0, 1}});
  // Where the second block and the trailer start: after the prelude and the
  // header (v1: 16 + 12 + 84 + 4, v2: 28 + 100), then each block of one row
  // (v1: 16 + 20 + 4, v2: 12 + 12 + 20 + 4).
  for (int v : {1, 2}) {
    const std::string second = v == 1 ? "156" : "176";
    const std::string trailer = v == 1 ? "196" : "224";
    const std::string P = Prelude(v, v), H = Header(body, v);
    struct Case {
      std::string bytes;
      std::string message;
    };
    const std::vector<Case> cases = {
        {P + Header(Body(1, {{"t", "sgd", 1, 0, 0}, {"t", "sgd", 1, 0, 0}}), v) +
             Trailer(0, 0, Body(1, {{"t", "sgd", 1, 0, 0}, {"t", "sgd", 1, 0, 0}}), v),
         "empty or repeated name \"t\""},
        {P + Header(Body(1, {}) + "z", v) + Trailer(0, 0, Body(1, {}) + "z", v),
         "1 bytes follow the last table"},
        {P + H + Block(1, 1, one, v) + Block(0, 1, one, v) + Trailer(2, 2, body, v),
         "block 1 at offset " + second +
             " is malformed: it is of table 0 but follows a block of table 1"},
        {P + H + Block(2, 1, one, v) + Trailer(1, 1, body, v),
         "it names table 2; the header has 2 tables"},
        {P + H + Block(0, 1, one, v) + Trailer(1, 1, body, v),
         "table \"u\" has 0 rows in blocks before its trailer at offset " + second +
             "; its header says 1"},
        {P + H + Block(0, 1, one, v) + Block(1, 1, one, v) + Trailer(2, 3, body, v),
         "its trailer at offset " + trailer + " counts 2 rows in 3 blocks; the file has 2 in 2"},
        {P + H + Block(0, 1, one, v) + Block(1, 1, one, v) +
             Trailer(2, 2, Body(2, {{"t", "sgd", 1, 0, 1}, {"u", "sgd", 1, 0, 1}}), v),
         "its trailer at offset " + trailer + " is of another file's header (files spliced)"},
    };
    for (const Case& c : cases) {
      Parsed p = Parse(c.bytes);
      EXPECT_TRUE(absl::IsDataLoss(p.contents.status())) << p.contents.status();
      EXPECT_THAT(Message(p), HasSubstr(c.message)) << "version " << v;
      EXPECT_TRUE(p.rows.empty());
    }
    EXPECT_TRUE(Parse(P + H + Block(0, 1, one, v) + Block(1, 1, one, v) + Trailer(2, 2, body, v))
                    .contents.ok());
  }
  // Version 2's records hold what their header says, no more and no less.
  const std::string P = Prelude(2), H = Header(body);
  const std::string T = Trailer(2, 2, body);
  EXPECT_THAT(Message(Parse(P + H + Framed(U32(0) + U64(1) + one + "x") + Block(1, 1, one) + T)),
              HasSubstr("block 0 at offset 128 of table \"t\" has 1 rows of 20 bytes in 21"));
  EXPECT_THAT(Message(Parse(P + H + Framed(U32(0) + U32(1)) + Block(1, 1, one) + T)),
              HasSubstr("block 0 at offset 128 is malformed: 8 bytes"));
  EXPECT_THAT(Message(Parse(P + H + Block(0, 1, one) + Block(1, 1, one) +
                            Framed(U32(0xffffffffu) + U64(2) + U64(2) + Crc(body) + "x"))),
              HasSubstr("its trailer at offset 224 has 25 bytes, not 24"));
  EXPECT_THAT(Message(Parse(P + H + Block(0, 1, one) + Block(1, 1, one) + T + Framed(""))),
              HasSubstr("has 16 bytes after its trailer, at offset 264"));
}

TEST(RowCheckpointTest, AVisitorErrorStopsTheReading) {
  const std::string bytes = SmallFile();
  int calls = 0;
  absl::StatusOr<RowFileContents> contents =
      ParseRowFile(bytes, kPath, [&](int, int64_t, auto, auto, int64_t, int64_t) {
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
      [&](int, int64_t, auto, auto, int64_t, int64_t) {
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
      [&](int, int64_t, auto, auto, int64_t, int64_t) {
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
      [](int, int64_t, auto, auto, int64_t, int64_t) { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsDataLoss(contents.status()));
  EXPECT_EQ(tables_calls, 1);
}

TEST(RowCheckpointTest, MissingFileIsNotFound) {
  MemEnv env;
  absl::StatusOr<RowFileContents> contents =
      ReadRowFile(&env, "/nothing",
                  [](int, int64_t, auto, auto, int64_t, int64_t) { return absl::OkStatus(); });
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
