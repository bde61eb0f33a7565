#include "serving/click_request.h"

#include "absl/status/status.h"
#include "data/feature_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ClickInputs Inputs() {
  ClickInputs inputs;
  inputs.num_dense = 2;
  inputs.features = {"user_id", "tokens"};
  return inputs;
}

TEST(ClickRequestTest, ReadsRowInstancesIdsAndTokens) {
  ClickRequest r;
  ASSERT_TRUE(ReadClickRequest(R"({"instances": [
      {"dense": [0.5, -1.5], "user_id": [17], "tokens": ["a", "b"]},
      {"dense": [2, 0], "user_id": 3},
      {"dense": [0, 0], "tokens": []}]})",
                               Inputs(), 10, &r)
                  .ok());
  EXPECT_TRUE(r.row);
  EXPECT_EQ(r.n, 3);
  EXPECT_THAT(r.dense, ElementsAre(0.5f, -1.5f, 2.0f, 0.0f, 0.0f, 0.0f));
  ASSERT_EQ(r.sparse.features.size(), 2u);
  const SparseFeatureColumn& user = r.sparse.features[0];
  EXPECT_EQ(user.name, "user_id");
  EXPECT_EQ(user.kind, SparseValueKind::kIds);
  EXPECT_THAT(user.offsets, ElementsAre(0, 1, 2, 2));
  EXPECT_THAT(user.values, ElementsAre(17u, 3u));
  const SparseFeatureColumn& tokens = r.sparse.features[1];
  EXPECT_EQ(tokens.kind, SparseValueKind::kTokens);
  EXPECT_THAT(tokens.offsets, ElementsAre(0, 2, 2, 2));
  EXPECT_THAT(tokens.values, ElementsAre(Fingerprint64("a"), Fingerprint64("b")));
}

TEST(ClickRequestTest, ColumnarInputsEqualRowInstances) {
  ClickRequest rows, columns;
  ASSERT_TRUE(ReadClickRequest(R"({"instances": [
      {"dense": [1, 2], "user_id": [4, 5], "tokens": "x"},
      {"dense": [3, 4], "user_id": [], "tokens": ["y"]}]})",
                               Inputs(), 10, &rows)
                  .ok());
  ASSERT_TRUE(ReadClickRequest(R"({"inputs": {"dense": [[1, 2], [3, 4]],
      "user_id": [[4, 5], []], "tokens": ["x", ["y"]]}})",
                               Inputs(), 10, &columns)
                  .ok());
  EXPECT_FALSE(columns.row);
  EXPECT_EQ(columns.n, rows.n);
  EXPECT_EQ(columns.dense, rows.dense);
  for (size_t f = 0; f < 2; ++f) {
    EXPECT_EQ(columns.sparse.features[f].offsets, rows.sparse.features[f].offsets);
    EXPECT_EQ(columns.sparse.features[f].values, rows.sparse.features[f].values);
    EXPECT_EQ(columns.sparse.features[f].kind, rows.sparse.features[f].kind);
  }
}

TEST(ClickRequestTest, RefusesBadInstancesSayingWhere) {
  struct Case {
    const char* body;
    const char* message;
  };
  for (
      const Case& c : std::vector<Case>{
          {R"({"instances": [{"dense": [1, 2], "userid": [1]}]})",
           "instances[0].userid: the model has no input \"userid\"; it reads \"dense\" and the "
           "features user_id, tokens"},
          {R"({"instances": [{"user_id": [1]}]})", "instances[0]: no \"dense\""},
          {R"({"instances": [{"dense": [1]}]})", "instances[0].dense: a list of 2 numbers"},
          {R"({"instances": [{"dense": [1, "2"]}]})", "instances[0].dense[1]: expected a finite"},
          {R"({"instances": [{"dense": [1, 1e39]}]})",
           "instances[0].dense[1]: expected a finite float32, got 1e+39"},
          {R"({"instances": [{"dense": [1, 2], "user_id": [-3]}]})",
           "instances[0].user_id[0]: id -3 is negative"},
          {R"({"instances": [{"dense": [1, 2], "user_id": [1.5]}]})",
           "an integer id or a string, not the number 1.5"},
          {R"({"instances": [{"dense": [1, 2], "user_id": [18446744073709551615]}]})",
           "past the largest id"},
          {R"({"instances": [{"dense": [1, 2], "user_id": [1, "a"]}]})",
           "mixes integer ids and strings"},
          {R"({"instances": [{"dense": [1, 2], "user_id": [1]}, {"dense": [1, 2], "user_id": "a"}]})",
           "instances[1].user_id: strings, but earlier instances gave integer ids"},
          {R"({"instances": [[1, 2]]})", "instances[0]: a click model's instance is an object"},
          {R"({"instances": {}})", "instances: is a list"},
          {R"({"inputs": {"dense": [[1, 2]], "user_id": []}})", "has 0 entries"},
          {R"({"instances": [], "inputs": {}})", "exactly one of"},
          {R"({"instancs": []})", "unexpected key \"instancs\""},
          {R"(not json)", "not JSON"},
      }) {
    ClickRequest r;
    absl::Status s = ReadClickRequest(c.body, Inputs(), 10, &r);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.body << " -> " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.body;
  }
}

TEST(ClickRequestTest, TooManyInstancesIsResourceExhausted) {
  ClickRequest r;
  EXPECT_TRUE(absl::IsResourceExhausted(ReadClickRequest(
      R"({"instances": [{"dense": [1, 2]}, {"dense": [1, 2]}, {"dense": [1, 2]}]})", Inputs(), 2,
      &r)));
  EXPECT_TRUE(absl::IsResourceExhausted(
      ReadClickRequest(R"({"inputs": {"dense": [[1, 2], [1, 2], [1, 2]]}})", Inputs(), 2, &r)));
}

TEST(ClickRequestTest, AModelWithoutDenseInputRefusesDense) {
  ClickInputs inputs;
  inputs.features = {"f"};
  ClickRequest r = EmptyClickRequest(inputs);
  EXPECT_TRUE(AppendClickInstance(nlohmann::json::parse(R"({"f": 1})"), inputs, "", &r).ok());
  absl::Status s =
      AppendClickInstance(nlohmann::json::parse(R"({"dense": [1], "f": 1})"), inputs, "line 2", &r);
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 2.dense: the model has no dense input"));
  EXPECT_EQ(r.n, 1);  // the refused instance left nothing behind
  EXPECT_THAT(r.sparse.features[0].offsets, ElementsAre(0, 1));
}

}  // namespace
}  // namespace pstrain
