#include "ps_protocol/shard_layout.h"

#include <utility>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(BalancedRangesTest, ContiguousAndBalanced) {
  auto r = BalancedRanges(10, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(r[1], (std::pair<int64_t, int64_t>{3, 6}));
  EXPECT_EQ(r[2], (std::pair<int64_t, int64_t>{6, 10}));
}

}  // namespace
}  // namespace pstrain
