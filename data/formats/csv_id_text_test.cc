// Naming a CSV column's ids by their text (the projector's metadata, issue 54).
#include "data/formats/csv_id_text.h"

#include <string>
#include <vector>

#include "data/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;

CsvSchema IdTextSchema() {
  CsvSchema schema;
  schema.labels = {"clicked"};
  schema.categorical.push_back({.name = "city", .hash_buckets = 1000});
  schema.categorical.push_back({.name = "tags", .hash_buckets = 1000, .separator = '|'});
  schema.categorical.push_back({.name = "age", .boundaries = {18, 25.5, 65}});
  return schema;
}

TEST(CsvIdTextTest, BucketsAreNamedByTheirRange) {
  const std::vector<double> b = {18, 25.5, 65};
  EXPECT_EQ(BucketText(b, 0), "< 18");
  EXPECT_EQ(BucketText(b, 1), "[18, 25.5)");
  EXPECT_EQ(BucketText(b, 3), ">= 65");
}

TEST(CsvIdTextTest, HashedIdsAreNamedByTheFirstTokenSeenInTheFiles) {
  MemEnv env;
  ASSERT_TRUE(env.WriteFileAtomic("/d/a.csv",
                                  "clicked,city,tags,age\n"
                                  "1,Paris,a|b,30\n"
                                  "0,\"Lyon, FR\",,17\n"
                                  "0,Nice,b||c,70\n")
                  .ok());
  ASSERT_TRUE(env.WriteFileAtomic("/d/other.csv", "x,y\n1,2\n").ok());  // another schema's
  ASSERT_TRUE(env.WriteFileAtomic("/d/b.csv", "age,city,clicked,tags\n40,Rome,1,d\n").ok());
  const int64_t paris = HashBucketFast("Paris", 1000), lyon = HashBucketFast("Lyon, FR", 1000),
                rome = HashBucketFast("Rome", 1000);
  const int64_t c = HashBucketFast("c", 1000), d = HashBucketFast("d", 1000);
  CsvIdsWanted wanted = {
      {"city", {paris, lyon, rome}}, {"tags", {c, d}}, {"age", {0, 2, 9}}, {"price", {1}}};
  absl::StatusOr<CsvIdTextResult> named =
      NameCsvIds(&env, IdTextSchema(), {"/d/a.csv", "/d/other.csv", "/d/b.csv"}, wanted);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->texts["city"][paris], "Paris");
  EXPECT_EQ(named->texts["city"][lyon], "Lyon, FR");
  EXPECT_EQ(named->texts["city"][rome], "Rome");
  EXPECT_EQ(named->texts["tags"][c], "c");
  EXPECT_EQ(named->texts["tags"][d], "d");
  EXPECT_EQ(named->texts["age"][0], "< 18");
  EXPECT_EQ(named->texts["age"][2], "[25.5, 65)");
  EXPECT_FALSE(named->texts["age"].contains(9));  // not an id of the column
  EXPECT_EQ(named->wanted, 8);                    // price is no categorical column
  EXPECT_EQ(named->named, 7);
  EXPECT_EQ(named->records, 4);

  // The limits: one record read, so only Paris (and the buckets) are named.
  absl::StatusOr<CsvIdTextResult> limited =
      NameCsvIds(&env, IdTextSchema(), {"/d/a.csv", "/d/b.csv"}, wanted, {.max_records = 1});
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->records, 1);
  EXPECT_EQ(limited->texts["city"].size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(NameCsvIds(&env, IdTextSchema(), {"/d/none.csv"}, wanted).status()));
}

// The namer keeps the names of the last set asked for: asked again, it reads
// no file for them (here: the file is gone); an id new to the set is looked
// for, and a file that cannot be read leaves it unnamed.
TEST(CsvIdTextTest, TheNamerRemembersTheLastSet) {
  MemEnv env;
  ASSERT_TRUE(
      env.WriteFileAtomic("/d/a.csv", "clicked,city,tags,age\n1,Paris,a,30\n0,Oslo,,9\n").ok());
  CsvRowNamer namer(&env, IdTextSchema(), {"/d/a.csv"});
  const int64_t paris = HashBucketFast("Paris", 1000), oslo = HashBucketFast("Oslo", 1000);
  std::vector<RowsToName> rows(2);
  rows[0] = {.table = "emb_city", .feature = "city", .ids = {paris, 3}};
  rows[1] = {.table = "cross", .feature = "", .ids = {5}};
  namer.Name(&rows);
  EXPECT_THAT(rows[0].texts, ElementsAre("Paris", ""));
  EXPECT_TRUE(rows[1].texts.empty());

  ASSERT_TRUE(env.DeleteFile("/d/a.csv").ok());
  rows[0].texts.clear();
  namer.Name(&rows);
  EXPECT_THAT(rows[0].texts, ElementsAre("Paris", ""));
  rows[0].ids = {oslo, paris};
  namer.Name(&rows);
  EXPECT_THAT(rows[0].texts, ElementsAre("", "Paris"));
}

}  // namespace
}  // namespace pstrain
