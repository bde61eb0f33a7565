// Tests of CSV files with a header read by a schema (data/formats/csv_format.h): the
// YAML form of the schema and its errors, binding the header, RFC 4180
// quoting, the numeric transforms, hashed categorical columns, the missing
// rules, and bad or random bytes.
#include "data/formats/csv_format.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/data_test_util.h"
#include "yaml-cpp/yaml.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kFile[] = "data/a.csv";

// --- Helpers ----------------------------------------------------------------

CsvNumericColumn Numeric(std::string name, CsvTransform transform = CsvTransform::kNone) {
  CsvNumericColumn c;
  c.name = std::move(name);
  c.transform = transform;
  return c;
}

CsvNumericColumn Standardized(std::string name, double mean, double stddev) {
  CsvNumericColumn c = Numeric(std::move(name), CsvTransform::kStandardize);
  c.mean = mean;
  c.stddev = stddev;
  return c;
}

CsvCategoricalColumn Categorical(std::string name, int64_t buckets,
                                 std::optional<char> separator = std::nullopt) {
  CsvCategoricalColumn c;
  c.name = std::move(name);
  c.hash_buckets = buckets;
  c.separator = separator;
  return c;
}

// Label "y", numeric "x" (as is) and "p" (log1p), categorical "c" (100
// buckets) and "tags" (1000 buckets, separated by '|').
CsvSchema Schema(CsvMissing missing = CsvMissing::kError) {
  CsvSchema s;
  s.labels = {"y"};
  s.numeric = {Numeric("x"), Numeric("p", CsvTransform::kLog1p)};
  s.categorical = {Categorical("c", 100), Categorical("tags", 1000, '|')};
  s.missing = missing;
  return s;
}

absl::StatusOr<CsvSchema> ParseYaml(const std::string& text) {
  return ParseCsvSchema(YAML::Load(text)["csv"], "job.yaml");
}

// Lines of `text` (split at '\n'), joined into records as a reader joins
// them (CsvRecordComplete), each handed to the parser with its first line's
// number. Stops at the first error.
absl::Status AppendText(CsvParser* parser, std::string_view text, int64_t first_line = 2) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= text.size();) {
    const size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      if (start < text.size()) lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  const char delimiter = parser->schema().delimiter;
  for (size_t i = 0; i < lines.size();) {
    const int64_t line_number = first_line + static_cast<int64_t>(i);
    std::string record(lines[i++]);
    while (!CsvRecordComplete(record, delimiter) && i < lines.size() &&
           record.size() <= kCsvMaxRecordBytes) {
      record.append("\n").append(lines[i++]);
    }
    if (absl::Status s = parser->AppendLine(record, line_number); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// A parser for `header`; fails the test if Create does.
CsvParser MakeParser(const CsvSchema& schema, std::string_view header = "y,x,p,c,tags") {
  absl::StatusOr<CsvParser> parser = CsvParser::Create(schema, header, kFile);
  EXPECT_TRUE(parser.ok()) << parser.status();
  return *std::move(parser);
}

// The header line, then `body`, parsed into one Dataset.
absl::StatusOr<Dataset> Parse(const CsvSchema& schema, std::string_view header,
                              std::string_view body) {
  absl::StatusOr<CsvParser> parser = CsvParser::Create(schema, header, kFile);
  if (!parser.ok()) return parser.status();
  if (absl::Status s = AppendText(&*parser, body); !s.ok()) return s;
  return parser->Take();
}

using testutil::ValuesOf;

uint64_t Id(std::string_view token, int64_t buckets) {
  return static_cast<uint64_t>(HashBucketFast(token, buckets));
}

// The Dataset's columns agree on its size (what a caller relies on after
// any error).
void ExpectConsistent(const Dataset& d, int64_t num_dense, size_t num_sparse) {
  EXPECT_TRUE(d.tabular);
  EXPECT_EQ(d.num_dense, num_dense);
  EXPECT_EQ(static_cast<int64_t>(d.dense.size()), d.size() * num_dense);
  ASSERT_EQ(d.sparse.size(), num_sparse);
  for (const SparseFeatureColumn& column : d.sparse) {
    EXPECT_EQ(column.kind, SparseValueKind::kIds);
    ASSERT_EQ(column.examples(), d.size()) << column.name;
    EXPECT_EQ(column.offsets.front(), 0);
    EXPECT_EQ(column.offsets.back(), static_cast<int64_t>(column.values.size()));
  }
}

// --- The schema -------------------------------------------------------------

TEST(CsvSchemaTest, ParsesTheYamlForm) {
  absl::StatusOr<CsvSchema> s = ParseYaml(R"(csv:
  delimiter: ";"
  label: clicked
  numeric:
    - {name: price, transform: log1p}
    - {name: age, transform: standardize, mean: 35.2, std: 12.1, default: 35}
    - {name: count}
  categorical:
    - {name: country, hash_buckets: 1000}
    - {name: tags, hash_buckets: 10000, separator: "|"}
  missing: default
)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->delimiter, ';');
  EXPECT_EQ(s->labels, std::vector<std::string>{"clicked"});
  ASSERT_EQ(s->numeric.size(), 3u);
  EXPECT_EQ(s->numeric[0].name, "price");
  EXPECT_EQ(s->numeric[0].transform, CsvTransform::kLog1p);
  EXPECT_FALSE(s->numeric[0].default_value.has_value());
  EXPECT_EQ(s->numeric[1].transform, CsvTransform::kStandardize);
  EXPECT_DOUBLE_EQ(s->numeric[1].mean, 35.2);
  EXPECT_DOUBLE_EQ(s->numeric[1].stddev, 12.1);
  EXPECT_EQ(s->numeric[1].default_value, 35.0f);
  EXPECT_EQ(s->numeric[2].transform, CsvTransform::kNone);
  ASSERT_EQ(s->categorical.size(), 2u);
  EXPECT_EQ(s->categorical[0].name, "country");
  EXPECT_EQ(s->categorical[0].hash_buckets, 1000);
  EXPECT_FALSE(s->categorical[0].separator.has_value());
  EXPECT_EQ(s->categorical[1].separator, '|');
  EXPECT_EQ(s->missing, CsvMissing::kDefault);
}

TEST(CsvSchemaTest, DefaultsAreCommaAndMissingIsAnError) {
  absl::StatusOr<CsvSchema> s = ParseYaml("csv: {label: y, numeric: [{name: x}]}");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->delimiter, ',');
  EXPECT_EQ(s->missing, CsvMissing::kError);
  EXPECT_THAT(s->categorical, IsEmpty());
  absl::StatusOr<CsvSchema> tab = ParseYaml("csv: {label: y, delimiter: \"\\t\"}");
  ASSERT_TRUE(tab.ok()) << tab.status();
  EXPECT_EQ(tab->delimiter, '\t');
}

// Each bad schema, the words its error must have, and its line.
struct BadSchema {
  const char* yaml;
  const char* message;
  int line;
};

TEST(CsvSchemaTest, ErrorsNameTheKeyAndLineAndSayWhatToWrite) {
  const BadSchema cases[] = {
      {"csv:\n  label: y\n  lable: z\n", "unknown key csv.lable; the keys here are delimiter", 3},
      {"csv:\n  label: y\n  numeric:\n    - {name: a, transfrom: log1p}\n",
       "unknown key csv.numeric[0].transfrom; the keys here are name, transform", 4},
      {"csv:\n  label: y\n  numeric:\n    - {name: a}\n    - {name: b, transform: log}\n",
       "csv.numeric[1].transform = \"log\": write none, log1p or standardize", 5},
      {"csv:\n  label: y\n  numeric:\n    - {name: a, transform: standardize, mean: 1}\n",
       "csv.numeric[0]: transform: standardize needs mean and std", 4},
      {"csv:\n  label: y\n  numeric:\n\n    - {name: a, transform: standardize, mean: 1, std: 0}\n",
       "csv.numeric[0].std = 0: the standard deviation must be > 0", 5},
      {"csv:\n  label: y\n  numeric:\n    - {name: a, mean: 1}\n",
       "csv.numeric[0].mean goes with transform: standardize", 4},
      {"csv:\n  label: y\n  numeric:\n    - {name: a, transform: log1p, default: -1}\n",
       "csv.numeric[0].default = -1 is <= -1, and log1p", 4},
      {"csv:\n  label: y\n  numeric:\n    - {name: a, default: abc}\n",
       "csv.numeric[0].default = \"abc\": is not a number; write a decimal number", 4},
      {"csv:\n  label: y\n  numeric:\n    - {transform: log1p}\n",
       "csv.numeric[0] needs name: the column's name in the CSV header", 4},
      {"csv:\n  label: y\n  numeric: price\n", "csv.numeric must be a list of columns", 3},
      {"csv:\n  label: y\n  numeric:\n    - price\n",
       "csv.numeric[0] must be a map, e.g. {name:", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: c, hash_buckets: 0}\n",
       "csv.categorical[0].hash_buckets = \"0\": write an integer >= 1", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: c, hash_buckets: ten}\n",
       "csv.categorical[0].hash_buckets = \"ten\": write an integer >= 1", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: c}\n",
       "csv.categorical[0] needs hash_buckets", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: c, hash_buckets: 9, separator: \"||\"}\n",
       "csv.categorical[0].separator = \"||\": write one character", 4},
      {"csv:\n  label: y\n  delimiter: \"ab\"\n", "csv.delimiter = \"ab\": write one character", 3},
      {"csv:\n  label: y\n  delimiter: '\"'\n", "csv.delimiter = \"\\\"\": write one character", 3},
      {"csv:\n  label: y\n  missing: maybe\n",
       "csv.missing = \"maybe\": write error (an empty field is an error), default", 3},
      {"csv:\n  numeric:\n    - {name: a}\n", "csv needs label: the name of the label column", 2},
      {"csv:\n  label:\n", "csv.label is empty; write the label column's name", 2},
      {"csv:\n  label: y\n  label: z\n", "csv.label is given twice", 3},
      {"csv:\n  label: y\n  numeric:\n    - {name: a}\n  categorical:\n    - {name: a, "
       "hash_buckets: 5}\n",
       "csv.categorical[0] reads column \"a\", as csv.numeric[0] (line 4) does; each column is "
       "read once",
       6},
      {"csv:\n  label: y\n  numeric:\n    - {name: y}\n",
       "csv.numeric[0] reads column \"y\", as csv.label (line 2) does", 4},
      {"csv:\n  - label\n", "csv must be a map", 2},
  };
  for (const BadSchema& c : cases) {
    absl::StatusOr<CsvSchema> s = ParseYaml(c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr("job.yaml: ")) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr(c.message)) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr(absl::StrCat(", line ", c.line))) << c.yaml;
  }
}

TEST(CsvSchemaTest, AnEmptySectionSaysWhatItNeeds) {
  absl::StatusOr<CsvSchema> s = ParseYaml("csv:\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("csv is empty; it needs at least label"));
}

TEST(CsvSchemaTest, CheckRefusesWhatNoFileCanSatisfy) {
  EXPECT_TRUE(CheckCsvSchema(Schema()).ok());
  CsvSchema s = Schema();
  s.numeric[0].name = "";
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("has no name"));
  s = Schema();
  s.categorical[1].name = "y";
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("column \"y\" is read twice"));
  s = Schema();
  s.categorical[0].hash_buckets = 0;
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("hash_buckets 0; it must be >= 1"));
  s = Schema();
  s.numeric[0].transform = CsvTransform::kStandardize;
  s.numeric[0].stddev = 0;
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("std > 0"));
  s = Schema();
  s.numeric[1].default_value = -2;
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("default -2 is <= -1"));
  s = Schema();
  s.delimiter = '"';
  EXPECT_EQ(CheckCsvSchema(s).code(), absl::StatusCode::kInvalidArgument);
  s = Schema();
  s.categorical[1].separator = '\n';
  EXPECT_EQ(CheckCsvSchema(s).code(), absl::StatusCode::kInvalidArgument);
  // Create checks the schema too.
  EXPECT_EQ(CsvParser::Create(s, "y,x,p,c,tags", kFile).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- The header ---------------------------------------------------------------

TEST(CsvHeaderTest, AMissingColumnIsNamedWithTheHeadersColumns) {
  absl::StatusOr<CsvParser> p = CsvParser::Create(Schema(), "y,x,c,tags,other", kFile);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(),
              HasSubstr("data/a.csv: the header has no column \"p\" (a numeric column of the "
                        "schema); its columns: \"y\", \"x\", \"c\", \"tags\", \"other\""));
}

TEST(CsvHeaderTest, HintsAtCaseAndAtAnotherDelimiter) {
  absl::StatusOr<CsvParser> p = CsvParser::Create(Schema(), "Y,x,p,c,tags", kFile);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("\"Y\" differs in case"));
  p = CsvParser::Create(Schema(), "y;x;p;c;tags", kFile);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("is the delimiter \";\"? set csv.delimiter"));
}

TEST(CsvHeaderTest, ColumnsAreBoundByNameInAnyOrderAndExtraOnesIgnored) {
  absl::StatusOr<Dataset> d = Parse(Schema(), "extra,tags,c,p,x,y,more", "junk,t1,us,0,2.5,1,\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 1);
  EXPECT_THAT(d->labels, ElementsAre(1));
  EXPECT_THAT(d->dense, ElementsAre(2.5f, 0.0f));
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), ElementsAre(Id("us", 100)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), ElementsAre(Id("t1", 1000)));
}

TEST(CsvHeaderTest, SkipsAByteOrderMarkAndAcceptsCrlf) {
  absl::StatusOr<CsvParser> p = CsvParser::Create(Schema(), "\xEF\xBB\xBFy,x,p,c,tags\r", kFile);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->AppendLine("0,1,0,a,b\r", 2).ok());
  ASSERT_TRUE(p->AppendLine("1,2,0,a,\"b\"\r", 3).ok());
  Dataset d = p->Take();
  EXPECT_THAT(d.labels, ElementsAre(0, 1));
  EXPECT_THAT(d.dense, ElementsAre(1.0f, 0.0f, 2.0f, 0.0f));
  // The '\r' is no part of the last field.
  EXPECT_THAT(ValuesOf(d.sparse[1], 0), ElementsAre(Id("b", 1000)));
  EXPECT_THAT(ValuesOf(d.sparse[1], 1), ElementsAre(Id("b", 1000)));
}

TEST(CsvHeaderTest, AColumnTheSchemaReadsMayNotBeNamedTwice) {
  absl::StatusOr<CsvParser> p = CsvParser::Create(Schema(), "y,x,p,c,tags,x", kFile);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("data/a.csv:1: the header names column \"x\" (a numeric column of the "
                        "schema) twice, as columns 2 and 6"));
  // Columns never read may repeat (or be unnamed).
  EXPECT_TRUE(CsvParser::Create(Schema(), "y,x,p,c,tags,z,z,,", kFile).ok());
}

TEST(CsvHeaderTest, QuotedNamesAndABadlyQuotedHeader) {
  EXPECT_TRUE(CsvParser::Create(Schema(), "\"y\",x,\"p\",c,tags", kFile).ok());
  absl::StatusOr<CsvParser> p = CsvParser::Create(Schema(), "y,\"x,p,c,tags", kFile);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("data/a.csv:1: the header's column 2: a quoted"));
}

// --- Records ------------------------------------------------------------------

TEST(CsvParserTest, BuildsTheShapeOfTabularExamples) {
  absl::StatusOr<Dataset> d = Parse(Schema(), "y,x,p,c,tags",
                                    "1,0.5,3,us,a|b\n"
                                    "0,-2,0,fr,c\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ExpectConsistent(*d, 2, 2);
  EXPECT_EQ(d->size(), 2);
  EXPECT_EQ(d->example_size(), 2);
  EXPECT_THAT(d->images, IsEmpty());
  EXPECT_EQ(d->sparse[0].name, "c");
  EXPECT_EQ(d->sparse[1].name, "tags");
  EXPECT_THAT(d->labels, ElementsAre(1, 0));
  EXPECT_THAT(d->dense, ElementsAre(0.5f, static_cast<float>(std::log1p(3.0)), -2.0f, 0.0f));
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), ElementsAre(Id("us", 100)));
  EXPECT_THAT(ValuesOf(d->sparse[0], 1), ElementsAre(Id("fr", 100)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), ElementsAre(Id("a", 1000), Id("b", 1000)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 1), ElementsAre(Id("c", 1000)));
}

TEST(CsvParserTest, TakeReturnsTheExamplesSinceTheLastTake) {
  CsvParser p = MakeParser(Schema());
  ASSERT_TRUE(p.AppendLine("1,1,1,a,b", 2).ok());
  EXPECT_EQ(p.size(), 1);
  EXPECT_EQ(p.Take().size(), 1);
  EXPECT_EQ(p.size(), 0);
  ASSERT_TRUE(p.AppendLine("0,2,2,a,b", 3).ok());
  Dataset d = p.Take();
  ExpectConsistent(d, 2, 2);
  EXPECT_THAT(d.labels, ElementsAre(0));
  Dataset empty = p.Take();
  ExpectConsistent(empty, 2, 2);
  EXPECT_EQ(empty.size(), 0);
}

TEST(CsvParserTest, LabelsAreClassIds) {
  CsvSchema s;
  s.labels = {"y"};
  absl::StatusOr<Dataset> d = Parse(s, "y", "0\n1\n7\n1.0\n 2 \n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->labels, ElementsAre(0, 1, 7, 1, 2));
  for (const char* bad : {"-1", "1.5", "yes", "3000000000", "nan"}) {
    CsvParser p = MakeParser(s, "y");
    const absl::Status st = p.AppendLine(bad, 9);
    EXPECT_THAT(st.message(),
                HasSubstr(absl::StrCat("data/a.csv:9: column \"y\": \"", bad,
                                       "\" is not a label: a class id, an integer >= 0")));
    EXPECT_EQ(p.size(), 0);
  }
}

// A multi-task model's rows: a label column per head, in the heads' order,
// each read as its head's kind; the example's labels side by side.
TEST(CsvParserTest, LabelsPerHeadAreReadEachByItsKind) {
  absl::StatusOr<CsvSchema> s =
      ParseYaml("csv:\n  labels: [click, dwell]\n  numeric:\n    - {name: x}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->labels, (std::vector<std::string>{"click", "dwell"}));
  absl::StatusOr<CsvParser> parser = CsvParser::Create(
      *s, "dwell,x,click", kFile, std::vector<CsvLabel>{CsvLabel::kClassId, CsvLabel::kValue});
  ASSERT_TRUE(parser.ok()) << parser.status();
  ASSERT_TRUE(AppendText(&*parser, "12.5,1,0\n-3,2,1\n").ok());
  Dataset d = parser->Take();
  EXPECT_EQ(d.label_width, 2);
  EXPECT_EQ(d.size(), 2);
  EXPECT_THAT(d.labels, ElementsAre(0.0f, 12.5f, 1.0f, -3.0f));
  EXPECT_THAT(d.dense, ElementsAre(1.0f, 2.0f));
  // The click column is a class id; a missing dwell is an error naming it.
  EXPECT_THAT(parser->AppendLine("1,1,0.5", 4).message(),
              HasSubstr("column \"click\": \"0.5\" is not a label"));
  EXPECT_THAT(parser->AppendLine(",1,1", 5).message(),
              HasSubstr("the label column \"dwell\" is empty"));
  EXPECT_EQ(parser->size(), 0);
  // As many kinds as label columns, and the columns in the header.
  EXPECT_THAT(CsvParser::Create(*s, "dwell,x,click", kFile, std::vector<CsvLabel>{CsvLabel::kValue})
                  .status()
                  .message(),
              HasSubstr("has 2 label columns (click, dwell) but the model has 1 head"));
  EXPECT_THAT(CsvParser::Create(*s, "x,click", kFile, CsvLabel::kClassId).status().message(),
              HasSubstr("the header has no column \"dwell\" (a label)"));
  // Rows to predict need no label column.
  absl::StatusOr<CsvParser> rows = CsvParser::Create(*s, "x", kFile, CsvLabel::kNone);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(AppendText(&*rows, "4\n").ok());
  EXPECT_THAT(rows->Take().labels, ElementsAre(0.0f, 0.0f));
  // label and labels together, an empty list, a label also read as a number.
  EXPECT_THAT(ParseYaml("csv:\n  label: a\n  labels: [b]\n").status().message(),
              HasSubstr("give label (one column) or labels (one per head), not both"));
  EXPECT_THAT(ParseYaml("csv:\n  labels: []\n").status().message(),
              HasSubstr("is a list of label columns"));
  EXPECT_FALSE(ParseYaml("csv:\n  labels: [a, b]\n  numeric:\n    - {name: b}\n").ok());
}

// A regression head's labels are numbers, as the numeric columns' are.
TEST(CsvParserTest, ARegressionHeadsLabelsAreNumbers) {
  CsvSchema s;
  s.labels = {"y"};
  absl::StatusOr<CsvParser> parser = CsvParser::Create(s, "y", kFile, CsvLabel::kValue);
  ASSERT_TRUE(parser.ok()) << parser.status();
  ASSERT_TRUE(AppendText(&*parser, "0\n-1.5\n12.25\n 3e2 \n7\n").ok());
  EXPECT_THAT(parser->Take().labels, ElementsAre(0.0f, -1.5f, 12.25f, 300.0f, 7.0f));
  for (const auto& [bad, problem] : std::vector<std::pair<std::string, std::string>>{
           {"yes", "is not a number"},
           {"nan", "is not a finite number"},
           {"1e39", "is out of the range of a float"}}) {
    const absl::Status st = parser->AppendLine(bad, 9);
    EXPECT_THAT(st.message(),
                HasSubstr(absl::StrCat("data/a.csv:9: column \"y\": \"", bad, "\" ", problem,
                                       ": a regression head's label is a number")));
    EXPECT_EQ(parser->size(), 0);
  }
}

TEST(CsvParserTest, NumbersAreDecimalAndFinite) {
  CsvSchema s;
  s.labels = {"y"};
  s.numeric = {Numeric("x")};
  absl::StatusOr<Dataset> d = Parse(s, "y,x", "0,+7\n0,.5\n0, 2e3 \n0,-0.25\n0,1e-30\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->dense, ElementsAre(7.0f, 0.5f, 2000.0f, -0.25f, 1e-30f));
  const std::pair<const char*, const char*> bad[] = {
      {"abc", "\"abc\" is not a number"},
      {"1.5x", "\"1.5x\" is not a number"},
      {"0x10", "\"0x10\" is not a number"},
      {"1,5", "3 fields"},
      {"nan", "\"nan\" is not a finite number"},
      {"-inf", "\"-inf\" is not a finite number"},
      {"1e39", "\"1e39\" is out of the range of a float"},
      {"1e999", "\"1e999\" is out of the range of a float"},
      {"\" \"", "\" \" is not a number"},
  };
  for (const auto& [text, message] : bad) {
    CsvParser p = MakeParser(s, "y,x");
    const absl::Status st = p.AppendLine(absl::StrCat("0,", text), 17);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(st.message(), HasSubstr("data/a.csv:17: ")) << text;
    EXPECT_THAT(st.message(), HasSubstr(message)) << text;
  }
}

TEST(CsvParserTest, ErrorsNameFileLineColumnAndTheBadText) {
  CsvParser p = MakeParser(Schema());
  const absl::Status st = p.AppendLine("1,abc,0,a,b", 17);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "data/a.csv:17: column \"x\": \"abc\" is not a number");
  // Long text is cut; control characters are escaped.
  const std::string long_text = std::string(100, '7') + "z";
  const absl::Status cut = p.AppendLine(absl::StrCat("1,", long_text, ",0,a,b"), 18);
  EXPECT_THAT(cut.message(),
              HasSubstr(absl::StrCat("column \"x\": \"", std::string(40, '7'), "...\"")));
  const absl::Status escaped = p.AppendLine("1,\"a\x01\",0,a,b", 19);
  EXPECT_THAT(escaped.message(), HasSubstr("\"a\\x01\" is not a number"));
}

TEST(CsvParserTest, Transforms) {
  CsvSchema s;
  s.labels = {"y"};
  s.numeric = {Numeric("raw"), Numeric("log", CsvTransform::kLog1p), Standardized("z", 35.0, 12.5)};
  absl::StatusOr<Dataset> d = Parse(s, "y,raw,log,z", "1,3.25,0,60\n0,-3.25,-0.5,10\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->dense, ElementsAre(3.25f, 0.0f, 2.0f,  // (60 - 35) / 12.5
                                    -3.25f, static_cast<float>(std::log1p(-0.5)), -2.0f));
  CsvParser p = MakeParser(s, "y,raw,log,z");
  for (const char* bad : {"-1", "-2"}) {
    const absl::Status st = p.AppendLine(absl::StrCat("1,0,", bad, ",0"), 4);
    EXPECT_THAT(st.message(),
                HasSubstr(absl::StrCat("data/a.csv:4: column \"log\": \"", bad,
                                       "\" is <= -1, and log1p (log(1 + x)) needs a value > -1")));
  }
  s.numeric[2].stddev = 1e-30;
  CsvParser tiny = MakeParser(s, "y,raw,log,z");
  EXPECT_THAT(tiny.AppendLine("1,0,0,1e20", 5).message(),
              HasSubstr("is out of the range of a float once standardized"));
}

TEST(CsvParserTest, HashesAsTensorFlowsToHashBucketFast) {
  CsvSchema s;
  s.labels = {"y"};
  s.categorical = {Categorical("word", 3), Categorical("big", 1 << 30)};
  absl::StatusOr<Dataset> d =
      Parse(s, "y,word,big", "1,Hello,Hello\n1,TensorFlow,x y\n0,2.x,\"\"\"\"\n");
  ASSERT_TRUE(d.ok()) << d.status();
  // tf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3) -> [0, 2, 2]
  // (TensorFlow's documentation; data/sparse_data_test.cc checks the same).
  EXPECT_THAT(d->sparse[0].values, ElementsAre(0u, 2u, 2u));
  EXPECT_THAT(d->sparse[1].values,
              ElementsAre(Id("Hello", 1 << 30), Id("x y", 1 << 30), Id("\"", 1 << 30)));
}

TEST(CsvParserTest, MultiValuedColumnsSkipEmptyPieces) {
  absl::StatusOr<Dataset> d = Parse(Schema(CsvMissing::kDefault), "y,x,p,c,tags",
                                    "1,1,1,a,x|y||z|\n1,1,1,a,|\n1,1,1,a,\"p,q|r\"\n1,1,1,a,\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ExpectConsistent(*d, 2, 2);
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), ElementsAre(Id("x", 1000), Id("y", 1000), Id("z", 1000)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 1), IsEmpty());
  EXPECT_THAT(ValuesOf(d->sparse[1], 2), ElementsAre(Id("p,q", 1000), Id("r", 1000)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 3), IsEmpty());
  // Without a separator the field is one token, '|' and all.
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), ElementsAre(Id("a", 100)));
}

// --- Bucketized columns -------------------------------------------------------

TEST(CsvBucketizeTest, ParsesTheYamlFormAndCountsItsIds) {
  absl::StatusOr<CsvSchema> s = ParseYaml(
      "csv:\n  label: y\n  numeric:\n    - {name: age, transform: standardize, mean: 40, std: "
      "12}\n  categorical:\n    - {name: age, bucketize: [18, 25.5, 35, 50, 65]}\n"
      "    - {name: city, hash_buckets: 100}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->categorical.size(), 2u);
  EXPECT_TRUE(s->categorical[0].bucketized());
  EXPECT_THAT(s->categorical[0].boundaries, ElementsAre(18, 25.5, 35, 50, 65));
  EXPECT_EQ(s->categorical[0].num_ids(), 6);
  EXPECT_EQ(s->categorical[0].hash_buckets, 0);
  EXPECT_FALSE(s->categorical[1].bucketized());
  EXPECT_EQ(s->categorical[1].num_ids(), 100);
}

TEST(CsvBucketizeTest, ErrorsNameTheKeyAndLine) {
  const BadSchema cases[] = {
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [5, 3]}\n",
       "csv.categorical[0].bucketize[1] = 3: the boundaries must be strictly increasing", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [1, 1]}\n",
       "csv.categorical[0].bucketize[1] = 1: the boundaries must be strictly increasing", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: []}\n",
       "csv.categorical[0].bucketize must be a list of one or more boundaries", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: 10}\n",
       "csv.categorical[0].bucketize must be a list of one or more boundaries", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [1, ten]}\n",
       "csv.categorical[0].bucketize[1] = \"ten\": is not a number", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [1, inf]}\n",
       "csv.categorical[0].bucketize[1] = \"inf\"", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [1], hash_buckets: 5}\n",
       "csv.categorical[0] has both bucketize (ids by the value's bucket) and hash_buckets", 4},
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [1], separator: \"|\"}\n",
       "csv.categorical[0].separator: a bucketized column holds one number", 4},
      // Read as a number and as its bucket: fine; twice bucketized, or as the
      // label, is not.
      {"csv:\n  label: y\n  categorical:\n    - {name: a, bucketize: [1]}\n"
       "    - {name: a, bucketize: [2]}\n",
       "csv.categorical[1] reads column \"a\", as csv.categorical[0] (line 4) does", 5},
      {"csv:\n  label: y\n  categorical:\n    - {name: y, bucketize: [1]}\n",
       "csv.categorical[0] reads column \"y\", as csv.label (line 2) does", 4},
  };
  for (const BadSchema& c : cases) {
    absl::StatusOr<CsvSchema> s = ParseYaml(c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr(c.message)) << c.yaml;
    EXPECT_THAT(s.status().message(), HasSubstr(absl::StrCat(", line ", c.line))) << c.yaml;
  }
  // The keys a categorical column takes now name bucketize too.
  absl::StatusOr<CsvSchema> s =
      ParseYaml("csv:\n  label: y\n  categorical:\n    - {name: a, buckets: 3}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("the keys here are name, hash_buckets, separator and bucketize"));
  s = ParseYaml("csv:\n  label: y\n  categorical:\n    - {name: a}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("or bucketize: the boundaries"));
}

TEST(CsvBucketizeTest, CheckRefusesWhatNoFileCanSatisfy) {
  CsvSchema s;
  s.labels = {"y"};
  s.numeric = {Numeric("a")};
  CsvCategoricalColumn b;
  b.name = "a";
  b.boundaries = {0, 10, 100};
  s.categorical = {b};
  EXPECT_TRUE(CheckCsvSchema(s).ok());
  s.categorical[0].boundaries = {0, 10, 10};
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("boundary 3 (10) is not finite or not above"));
  s.categorical[0].boundaries = {0, NAN};
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("boundary 2 (nan) is not finite"));
  s.categorical[0].boundaries = {0};
  s.categorical[0].hash_buckets = 8;
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("is bucketized; it has no hash_buckets"));
  s.categorical[0].hash_buckets = 0;
  s.categorical[0].separator = '|';
  EXPECT_THAT(CheckCsvSchema(s).message(), HasSubstr("no separator"));
  // A hashed column may not share a numeric one's name.
  s.categorical = {Categorical("a", 10)};
  EXPECT_THAT(CheckCsvSchema(s).message(),
              HasSubstr("column \"a\" is read twice (as a numeric and a hashed categorical"));
}

TEST(CsvBucketizeTest, IdsAreTensorFlowsBucketize) {
  // tf.raw_ops.Bucketize's documented example: boundaries [0, 10, 100],
  // input [[-5, 10000], [150, 10], [5, 100]] -> [[0, 3], [3, 2], [1, 3]]: a
  // value equal to a boundary is in the bucket that starts there.
  EXPECT_EQ(BucketOf({0, 10, 100}, -5), 0);
  EXPECT_EQ(BucketOf({0, 10, 100}, 10000), 3);
  EXPECT_EQ(BucketOf({0, 10, 100}, 150), 3);
  EXPECT_EQ(BucketOf({0, 10, 100}, 10), 2);
  EXPECT_EQ(BucketOf({0, 10, 100}, 5), 1);
  EXPECT_EQ(BucketOf({0, 10, 100}, 100), 3);
  EXPECT_EQ(BucketOf({0, 10, 100}, 0), 1);
  EXPECT_EQ(BucketOf({0, 10, 100}, -0.0001), 0);
}

TEST(CsvBucketizeTest, AColumnIsReadAsANumberAndAsItsBucket) {
  CsvSchema s;
  s.labels = {"y"};
  s.numeric = {Standardized("age", 40, 10)};
  CsvCategoricalColumn b;
  b.name = "age";
  b.boundaries = {18, 25, 35, 50, 65};
  s.categorical = {b, Categorical("city", 100)};
  s.missing = CsvMissing::kDefault;
  absl::StatusOr<Dataset> d =
      Parse(s, "city,age,y", "a,17,0\nb,18,1\nc, 34.9 ,0\nd,35,1\ne,99,0\nf,,1\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ExpectConsistent(*d, 1, 2);
  EXPECT_THAT(d->dense,
              testing::Pointwise(testing::FloatNear(1e-6f),
                                 std::vector<float>{-2.3f, -2.2f, -0.51f, -0.5f, 5.9f, 0.0f}));
  EXPECT_EQ(d->sparse[0].name, "age");
  EXPECT_EQ(d->sparse[0].kind, SparseValueKind::kIds);
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), ElementsAre(0u));
  EXPECT_THAT(ValuesOf(d->sparse[0], 1), ElementsAre(1u));
  EXPECT_THAT(ValuesOf(d->sparse[0], 2), ElementsAre(2u));
  EXPECT_THAT(ValuesOf(d->sparse[0], 3), ElementsAre(3u));
  EXPECT_THAT(ValuesOf(d->sparse[0], 4), ElementsAre(5u));
  // A missing field under `missing: default`: no ids, as a hashed column.
  EXPECT_THAT(ValuesOf(d->sparse[0], 5), IsEmpty());
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), ElementsAre(Id("a", 100)));
}

TEST(CsvBucketizeTest, AValueThatIsNotANumberIsNamedAndNothingIsAppended) {
  CsvSchema s;
  s.labels = {"y"};
  CsvCategoricalColumn b;
  b.name = "age";
  b.boundaries = {18, 65};
  s.categorical = {b};
  absl::StatusOr<CsvParser> p = CsvParser::Create(s, "y,age", kFile);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->AppendLine("1,20", 2).ok());
  absl::Status e = p->AppendLine("1,twenty", 3);
  EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.message(), HasSubstr("data/a.csv:3: column \"age\": \"twenty\" is not a number: "
                                     "the column is bucketized by its value"));
  e = p->AppendLine("1,1e999", 4);
  EXPECT_THAT(e.message(), HasSubstr("column \"age\""));
  // Under `missing: error` an empty field is refused as any column's.
  e = p->AppendLine("1,", 5);
  EXPECT_THAT(e.message(), HasSubstr("column \"age\" is empty"));
  Dataset d = p->Take();
  ASSERT_EQ(d.size(), 1);
  EXPECT_THAT(ValuesOf(d.sparse[0], 0), ElementsAre(1u));
}

// --- Quoting ----------------------------------------------------------------

TEST(CsvQuotingTest, DelimitersAndDoubledQuotesInsideQuotes) {
  absl::StatusOr<Dataset> d = Parse(Schema(), "y,x,p,c,tags",
                                    "\"1\",\"2.5\",0,\"Paris, France\",\"say \"\"hi\"\"\"\n"
                                    "0,1,0,a\"b,\"\"\"\"\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->labels, ElementsAre(1, 0));
  EXPECT_THAT(d->dense, ElementsAre(2.5f, 0.0f, 1.0f, 0.0f));
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), ElementsAre(Id("Paris, France", 100)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), ElementsAre(Id("say \"hi\"", 1000)));
  // A '"' inside an unquoted field is data; """" is one '"'.
  EXPECT_THAT(ValuesOf(d->sparse[0], 1), ElementsAre(Id("a\"b", 100)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 1), ElementsAre(Id("\"", 1000)));
}

TEST(CsvQuotingTest, AQuotedEmptyFieldIsMissing) {
  CsvParser p = MakeParser(Schema());
  const absl::Status st = p.AppendLine("1,\"\",0,a,b", 3);
  EXPECT_THAT(st.message(), HasSubstr("data/a.csv:3: column \"x\" is empty (a missing value)"));
  EXPECT_EQ(p.size(), 0);
}

TEST(CsvQuotingTest, RecordsSpanLinesInsideQuotes) {
  EXPECT_TRUE(CsvRecordComplete("", ','));
  EXPECT_TRUE(CsvRecordComplete("a,b,c", ','));
  EXPECT_FALSE(CsvRecordComplete("1,2,\"two", ','));
  EXPECT_TRUE(CsvRecordComplete("1,2,\"two\nlines\",x", ','));
  EXPECT_FALSE(CsvRecordComplete("1,2,\"ends in a quote \"\"", ','));
  EXPECT_TRUE(CsvRecordComplete("1,2,\"ends in a quote \"\"\"", ','));
  // A '"' inside an unquoted field opens nothing; the delimiter matters.
  EXPECT_TRUE(CsvRecordComplete("1,a\"b,c", ','));
  EXPECT_FALSE(CsvRecordComplete("1;\"a", ';'));
  EXPECT_TRUE(CsvRecordComplete("1,\"a", ';'));

  // A record read a line at a time: the scanner, which reads only what was
  // appended, answers as CsvRecordComplete of the whole text does, for every
  // record of 1 to 6 characters of quotes, delimiters, letters and line
  // breaks, cut into lines at each of its breaks.
  const std::string alphabet = "\",a\n";
  for (int n = 1; n <= 6; ++n) {
    std::vector<int> digits(n, 0);
    while (true) {
      std::string text;
      for (int d : digits) text.push_back(alphabet[d]);
      CsvQuoteScanner scanner(',');
      for (size_t end = text.find('\n');; end = text.find('\n', end + 1)) {
        const std::string prefix = text.substr(0, end);
        EXPECT_EQ(scanner.Complete(prefix), CsvRecordComplete(prefix, ',')) << "[" << prefix << "]";
        if (end == std::string::npos) break;
      }
      int k = 0;
      while (k < n && ++digits[k] == static_cast<int>(alphabet.size())) digits[k++] = 0;
      if (k == n) break;
    }
  }

  CsvParser p = MakeParser(Schema());
  ASSERT_TRUE(AppendText(&p, "1,1,0,\"two\nlines\",\"a|\n|b\"\n0,2,0,c,d\n").ok());
  Dataset d = p.Take();
  ExpectConsistent(d, 2, 2);
  EXPECT_THAT(d.labels, ElementsAre(1, 0));
  EXPECT_THAT(ValuesOf(d.sparse[0], 0), ElementsAre(Id("two\nlines", 100)));
  EXPECT_THAT(ValuesOf(d.sparse[1], 0), ElementsAre(Id("a", 1000), Id("\n", 1000), Id("b", 1000)));
  // The next record's line number counts the lines joined before it.
  const absl::Status st = AppendText(&p, "1,1,0,\"x\ny\",b\n1,bad,0,a,b\n");
  EXPECT_THAT(st.message(), HasSubstr("data/a.csv:4: column \"x\": \"bad\""));
}

TEST(CsvQuotingTest, MalformedQuotesAreNamed) {
  CsvParser p = MakeParser(Schema());
  EXPECT_THAT(p.AppendLine("1,1,0,\"open,b", 5).message(),
              HasSubstr("data/a.csv:5: column \"c\": a quoted field is not closed"));
  EXPECT_THAT(p.AppendLine("1,1,0,\"a\"b,c", 6).message(),
              HasSubstr("data/a.csv:6: column \"c\": text follows the closing '\"'"));
  EXPECT_THAT(p.AppendLine("1,1,0,a,b,\"x", 7).message(),
              HasSubstr("data/a.csv:7: field 6: a quoted field is not closed"));
  EXPECT_EQ(p.size(), 0);
}

// --- Missing values -----------------------------------------------------------

TEST(CsvMissingTest, ErrorNamesTheColumnAndWhatToDo) {
  CsvParser p = MakeParser(Schema(CsvMissing::kError));
  absl::Status st = p.AppendLine("1,,0,a,b", 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("data/a.csv:8: column \"x\" is empty (a missing value); "
                                      "write a value, or set csv.missing to default"));
  st = p.AppendLine("1,1,0,,b", 9);
  EXPECT_THAT(st.message(), HasSubstr("data/a.csv:9: column \"c\" is empty"));
  st = p.AppendLine(",1,0,a,b", 10);
  EXPECT_THAT(st.message(), HasSubstr("data/a.csv:10: the label column \"y\" is empty"));
  EXPECT_EQ(p.size(), 0);
  EXPECT_EQ(p.skipped(), 0);
}

TEST(CsvMissingTest, DefaultTakesTheDefaultTransformedOrZero) {
  CsvSchema s = Schema(CsvMissing::kDefault);
  s.numeric.push_back(Standardized("age", 30, 5));
  s.numeric.back().default_value = 40;
  s.numeric.push_back(Standardized("n", 30, 5));
  s.numeric[1].default_value = 3;  // p: log1p
  absl::StatusOr<Dataset> d = Parse(s, "y,x,p,c,tags,age,n", "1,,,,,,\n0,1,0,a,b,35,35\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ExpectConsistent(*d, 4, 2);
  EXPECT_THAT(d->dense, ElementsAre(0.0f, static_cast<float>(std::log1p(3.0)), 2.0f, 0.0f,  //
                                    1.0f, 0.0f, 1.0f, 1.0f));
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), IsEmpty());
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), IsEmpty());
  // A label has no default.
  CsvParser p = MakeParser(Schema(CsvMissing::kDefault));
  EXPECT_THAT(p.AppendLine(",1,1,a,b", 4).message(), HasSubstr("the label column \"y\" is empty"));
}

TEST(CsvMissingTest, SkipDropsAndCountsTheRecord) {
  CsvParser p = MakeParser(Schema(CsvMissing::kSkip));
  ASSERT_TRUE(AppendText(&p, "1,1,0,a,b\n1,,0,a,b\n,1,0,a,b\n0,2,0,a,\n0,3,0,a,b\n").ok());
  EXPECT_EQ(p.skipped(), 3);
  Dataset d = p.Take();
  ExpectConsistent(d, 2, 2);
  EXPECT_THAT(d.labels, ElementsAre(1, 0));
  EXPECT_THAT(d.dense, ElementsAre(1.0f, 0.0f, 3.0f, 0.0f));
  // A bad value in a record kept is still an error.
  EXPECT_THAT(p.AppendLine("1,x,0,a,b", 7).message(), HasSubstr("\"x\" is not a number"));
  EXPECT_EQ(p.skipped(), 3);
}

TEST(CsvMissingTest, BlankLinesAreNoRecords) {
  CsvParser p = MakeParser(Schema());
  ASSERT_TRUE(AppendText(&p, "\n1,1,0,a,b\n\r\n\n").ok());
  EXPECT_EQ(p.size(), 1);
  EXPECT_EQ(p.skipped(), 0);
}

// --- Bad records ----------------------------------------------------------------

TEST(CsvParserTest, ABadRecordLeavesTheDatasetAsItWas) {
  CsvParser p = MakeParser(Schema());
  ASSERT_TRUE(p.AppendLine("1,1,0,a,x|y", 2).ok());
  // Each fails after some of its fields parsed.
  for (const char* bad : {"0,2,0,b,z|w,extra", "0,2,-3,b,z", "0,2,0,b,\"z", "0,2,0,,z",
                          "2.5,2,0,b,z", "0,1e99,0,b,z"}) {
    EXPECT_EQ(p.AppendLine(bad, 3).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  ASSERT_TRUE(p.AppendLine("0,3,0,c,v", 4).ok());
  Dataset d = p.Take();
  ExpectConsistent(d, 2, 2);
  EXPECT_THAT(d.labels, ElementsAre(1, 0));
  EXPECT_THAT(d.dense, ElementsAre(1.0f, 0.0f, 3.0f, 0.0f));
  EXPECT_THAT(ValuesOf(d.sparse[1], 0), ElementsAre(Id("x", 1000), Id("y", 1000)));
  EXPECT_THAT(ValuesOf(d.sparse[1], 1), ElementsAre(Id("v", 1000)));
}

TEST(CsvParserTest, AFieldCountOtherThanTheHeadersIsNamed) {
  CsvParser p = MakeParser(Schema());
  EXPECT_THAT(p.AppendLine("1,1,0,a", 12).message(),
              HasSubstr("data/a.csv:12: 4 fields, but the header has 5 (\"y\", \"x\", \"p\", "
                        "\"c\", \"tags\")"));
  EXPECT_THAT(p.AppendLine("1,1,0,a,b,", 13).message(),
              HasSubstr("data/a.csv:13: 6 fields, but the header has 5"));
  EXPECT_THAT(p.AppendLine(std::string(kCsvMaxRecordBytes + 1, ','), 14).message(),
              HasSubstr("over the limit"));
  EXPECT_EQ(p.size(), 0);
}

TEST(CsvParserTest, TabSeparatedFiles) {
  CsvSchema s = Schema();
  s.delimiter = '\t';
  absl::StatusOr<Dataset> d = Parse(s, "y\tx\tp\tc\ttags", "1\t2\t0\ta,b\t\"q\tr\"\n");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(ValuesOf(d->sparse[0], 0), ElementsAre(Id("a,b", 100)));
  EXPECT_THAT(ValuesOf(d->sparse[1], 0), ElementsAre(Id("q\tr", 1000)));
}

// Every prefix of good records, and random bytes: never a crash, only OK or
// InvalidArgument, and the Dataset stays whole.
TEST(CsvParserTest, TruncatedAndRandomBytes) {
  const std::string good = "1,2.5,3,\"Paris, France\",\"a|\"\"b\"\"|c\"\n0,,0,x,\n";
  std::mt19937 rng(40);
  std::vector<std::string> inputs;
  for (size_t n = 0; n <= good.size(); ++n) inputs.push_back(good.substr(0, n));
  const std::string alphabet = "01,.\"|\n\r-e+ x";
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) {
      c = rng() % 2 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() % 256);
    }
    inputs.push_back(s);
  }
  for (CsvMissing missing : {CsvMissing::kError, CsvMissing::kDefault, CsvMissing::kSkip}) {
    CsvParser p = MakeParser(Schema(missing));
    int64_t examples = 0;
    for (const std::string& input : inputs) {
      const absl::Status st = AppendText(&p, input);
      EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kInvalidArgument) << st;
      // Garbage as a header too.
      const absl::StatusOr<CsvParser> q = CsvParser::Create(Schema(missing), input, kFile);
      EXPECT_TRUE(q.ok() || q.status().code() == absl::StatusCode::kInvalidArgument);
      examples += p.size();
      Dataset d = p.Take();
      ExpectConsistent(d, 2, 2);
      for (float v : d.dense) EXPECT_TRUE(std::isfinite(v));
      for (uint64_t id : d.sparse[0].values) EXPECT_LT(id, 100u);
      for (uint64_t id : d.sparse[1].values) EXPECT_LT(id, 1000u);
      for (float y : d.labels) EXPECT_GE(y, 0);
    }
    EXPECT_GT(examples, 0);
  }
}

}  // namespace
}  // namespace pstrain
