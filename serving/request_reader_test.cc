#include "serving/request_reader.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pstrain {
namespace {

using nlohmann::json;

// A small model input: 2 x 3 with 1 channel, and 2 x 2 with 3 channels.
const std::vector<int64_t> kGray = {2, 3, 1};
const std::vector<int64_t> kColor = {2, 2, 3};

json Nested(const std::vector<float>& f, const std::vector<int64_t>& dims, size_t depth = 0,
            size_t* at = nullptr) {
  size_t start = 0;
  if (at == nullptr) at = &start;
  if (depth == dims.size()) return f[(*at)++];
  json list = json::array();
  for (int64_t i = 0; i < dims[depth]; ++i) list.push_back(Nested(f, dims, depth + 1, at));
  return list;
}

std::vector<float> Values(int64_t n, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37 + seed * 11) % 256) / 255;
  return v;
}

// Both readers on one body: the plain one must take it, and agree.
void ExpectPlain(const std::string& body, const std::vector<int64_t>& shape, bool row,
                 const std::vector<float>& images) {
  PlainRequest plain, general;
  ASSERT_TRUE(ReadPlainRequest(body, shape, 100, &plain)) << body;
  ASSERT_TRUE(ReadGeneralRequest(body, shape, 100, &general).ok()) << body;
  EXPECT_EQ(plain.row, row);
  EXPECT_EQ(plain.images, images) << body;
  EXPECT_EQ(plain.n, general.n);
  EXPECT_EQ(plain.row, general.row);
  EXPECT_EQ(plain.images, general.images);
}

TEST(RequestReaderTest, ThePlainReaderTakesEveryNumericForm) {
  const std::vector<float> a = Values(6, 1), b = Values(6, 2);
  std::vector<float> both = a;
  both.insert(both.end(), b.begin(), b.end());
  // Flat, [H][W], [H][W][C]; two instances; row and columnar; a signature.
  ExpectPlain(json({{"instances", {a, b}}}).dump(), kGray, true, both);
  ExpectPlain(json({{"instances", {Nested(a, {2, 3}), Nested(b, {2, 3})}}}).dump(), kGray, true,
              both);
  ExpectPlain(json({{"instances", {Nested(a, {2, 3, 1})}}}).dump(), kGray, true, a);
  ExpectPlain(json({{"inputs", {a, Nested(b, {2, 3})}}}).dump(), kGray, false, both);
  ExpectPlain(json({{"inputs", {{"image", {a}}}}}).dump(), kGray, false, a);
  ExpectPlain(json({{"signature_name", "serving_default"}, {"instances", {a}}}).dump(), kGray, true,
              a);
  ExpectPlain(R"( { "instances" : [ [0, 1, 0.5, 1e-1, 0.0, 1] ] } )", kGray, true,
              {0, 1, 0.5, 0.1f, 0, 1});
  const std::vector<float> c = Values(12, 3);
  ExpectPlain(json({{"instances", {c, Nested(c, {2, 2, 3})}}}).dump(), kColor, true, [&] {
    std::vector<float> v = c;
    v.insert(v.end(), c.begin(), c.end());
    return v;
  }());
}

TEST(RequestReaderTest, ThePlainReaderLeavesEverythingElseToTheGeneralOne) {
  const std::vector<float> a = Values(6, 1);
  const std::string flat = json(a).dump();
  const std::vector<std::string> others = {
      "",
      "   ",
      "[]",
      "{}",
      "{\"instances\": []}",
      "{\"instances\": [[]]}",
      "{\"instances\": [" + flat + "]",             // truncated
      "{\"instances\": [" + flat + "]} x",          // trailing bytes
      "{\"instances\": [" + flat + "], \"x\": 1}",  // a key the plain form has not
      "{\"instances\": [" + flat + "], \"instances\": [" + flat + "]}",
      "{\"instances\": [" + flat + "], \"inputs\": [" + flat + "]}",
      "{\"signature_name\": \"classify\", \"instances\": [" + flat + "]}",
      "{\"signature_name\": 7, \"instances\": [" + flat + "]}",
      "{\"instances\": [{\"image\": " + flat + "}]}",  // objects: the general reader
      "{\"instances\": [{\"b64\": \"AAAA\"}]}",
      "{\"inputs\": {\"image\": [" + flat + "], \"x\": 1}}",
      "{\"inputs\": {\"picture\": [" + flat + "]}}",
      "{\"instances\": [[0, 0, 0, 0, 0]]}",        // 5 numbers, 6 belong
      "{\"instances\": [[0, 0, 0, 0, 0, 0, 0]]}",  // 7
      "{\"instances\": [[0, 0, 0, 0, 0, 1.5]]}",   // outside [0, 1]
      "{\"instances\": [[0, 0, 0, 0, 0, -0.5]]}",
      "{\"instances\": [[0, 0, 0, 0, 0, 1e999]]}",
      "{\"instances\": [[0, 0, 0, 0, 0, null]]}",
      "{\"instances\": [[0, 0, 0, 0, 0, true]]}",
      "{\"instances\": [[0, 0, 0, 0, 0, \"0\"]]}",
      "{\"instances\": [[[0, 0, 0], [0, 0]]]}",  // ragged
      "{\"instances\": [[[0, 0, 0], [0, 0, 0], [0, 0, 0]]]}",
      "{\"instances\": [[[0, 0, 0], 0]]}",            // a number where a list belongs
      "{\"instances\": [[[0, 0, 0], [0, [0], 0]]]}",  // a list where a number belongs
      "{\"instances\": [[[[[0]]]]]}",                 // nested 4 deep
      "{\"instances\": [0]}",
      "{\"instances\": " + flat + "}",
      "{\"instances\": {\"image\": [" + flat + "]}}",
      "{\"inputs\": 0}",
  };
  for (const std::string& body : others) {
    PlainRequest plain;
    EXPECT_FALSE(ReadPlainRequest(body, kGray, 100, &plain)) << body;
  }
  // [H][W] takes 1 channel only.
  PlainRequest plain;
  EXPECT_FALSE(ReadPlainRequest(json({{"instances", {Nested(Values(12, 1), {2, 2 * 3})}}}).dump(),
                                kColor, 100, &plain));
  // More instances than allowed: the general reader says how many.
  const std::string three = json({{"instances", {a, a, a}}}).dump();
  EXPECT_FALSE(ReadPlainRequest(three, kGray, 2, &plain));
  absl::Status s = ReadPredictRequest(three, kGray, 2, &plain);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("3 instances; at most 2"), std::string::npos) << s;
}

TEST(RequestReaderTest, TheGeneralReaderNamesWhatIsWrong) {
  PlainRequest out;
  auto message = [&](const std::string& body) {
    absl::Status s = ReadPredictRequest(body, kGray, 100, &out);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << body << ": " << s;
    return std::string(s.message());
  };
  EXPECT_NE(message("").find("empty request body"), std::string::npos);
  EXPECT_NE(message("{").find("malformed JSON"), std::string::npos);
  // A number too large for a double is an error, not an exception (found by
  // fuzz/predict_request_fuzzer.cc).
  EXPECT_NE(message("9E999").find("number overflow"), std::string::npos);
  EXPECT_NE(message("{\"instances\": [[0,0,0,0,0,1e999]]}").find("number overflow"),
            std::string::npos);
  EXPECT_NE(message("[1]").find("is a JSON object"), std::string::npos);
  EXPECT_NE(
      message("{\"signature_name\": 7, \"instances\": [[0,0,0,0,0,0]]}").find("no signature 7"),
      std::string::npos);
  EXPECT_NE(message("{\"instances\": []}").find("\"instances\" is a non-empty list"),
            std::string::npos);
  EXPECT_NE(message("{\"instances\": [[0,0,0,0,0,0], [0,0,0,0,0,2]]}").find("instances[1][5]"),
            std::string::npos);
  EXPECT_NE(message("{\"instances\": [[0,0,0,0,0]]}").find("a list of 5 where 6 belong"),
            std::string::npos);
}

// Random damage to good bodies: whatever the plain reader takes, the general
// reader takes too, with the same instances.
TEST(RequestReaderTest, ThePlainReaderNeverTakesWhatTheGeneralOneRefuses) {
  const std::vector<std::string> seeds = {
      json({{"instances", {Values(6, 1), Values(6, 2)}}}).dump(),
      json({{"instances", {Nested(Values(6, 1), {2, 3})}}}).dump(),
      json({{"inputs", {{"image", {Nested(Values(6, 4), {2, 3, 1})}}}}}).dump(),
      json({{"signature_name", "serving_default"}, {"inputs", {Values(6, 5)}}}).dump(),
  };
  const std::string alphabet = "[]{},:\" 0123456789.-eE\\instancesinputsimagetruenull";
  std::mt19937 rng(7);
  int taken = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string body = seeds[trial % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (body.size() + 1);
      switch (rng() % 3) {
        case 0:  // insert
          body.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 1:  // delete
          if (at < body.size()) body.erase(at, 1);
          break;
        default:  // replace
          if (at < body.size()) body[at] = alphabet[rng() % alphabet.size()];
      }
    }
    PlainRequest plain, general;
    if (!ReadPlainRequest(body, kGray, 3, &plain)) continue;
    ++taken;
    ASSERT_TRUE(ReadGeneralRequest(body, kGray, 3, &general).ok()) << body;
    EXPECT_EQ(plain.row, general.row) << body;
    EXPECT_EQ(plain.n, general.n) << body;
    EXPECT_EQ(plain.images, general.images) << body;
  }
  EXPECT_GT(taken, 100);  // the damage left many bodies good (digits changed, spaces)
}

}  // namespace
}  // namespace pstrain
