#include "batching.h"
#include "test_util.h"

using namespace npu_ge;

TEST(Gear, PicksSmallestGearAtLeastTheBatch)
{
  size_t gear = 0;
  ASSERT_TRUE(SelectGear({8, 1, 4, 2}, 3, &gear));
  EXPECT_EQ(gear, 4u);
  ASSERT_TRUE(SelectGear({8, 1, 4, 2}, 4, &gear));
  EXPECT_EQ(gear, 4u);
  ASSERT_TRUE(SelectGear({8, 1, 4, 2}, 1, &gear));
  EXPECT_EQ(gear, 1u);
  ASSERT_TRUE(SelectGear({16, 6}, 5, &gear));
  EXPECT_EQ(gear, 6u);
}

TEST(Gear, FailsWhenBatchExceedsEveryGear)
{
  size_t gear = 77;
  EXPECT_FALSE(SelectGear({1, 2, 4}, 5, &gear));
  EXPECT_EQ(gear, 77u);
  EXPECT_FALSE(SelectGear({}, 1, &gear));
  EXPECT_FALSE(SelectGear({0, -3}, 1, &gear));
}

TEST(Batch, RowOffsetsStackRequestsInOrder)
{
  EXPECT_EQ(RowOffsets({3, 1, 4}), (std::vector<size_t>{0, 3, 4}));
  EXPECT_TRUE(RowOffsets({}).empty());
}

TEST(Batch, ChunkByRowsNeverExceedsTheLimit)
{
  using Chunks = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(ChunkByRows({2, 2, 2, 2}, 4), (Chunks{{0, 2}, {2, 4}}));
  EXPECT_EQ(ChunkByRows({1, 1, 1}, 8), (Chunks{{0, 3}}));
  EXPECT_EQ(ChunkByRows({1, 1, 1}, 1), (Chunks{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(ChunkByRows({9, 1}, 4), (Chunks{{0, 1}, {1, 2}}));  // oversize alone
  EXPECT_TRUE(ChunkByRows({}, 4).empty());
}

TEST(Batch, ElementCount)
{
  EXPECT_EQ(ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({4, -1}), -1);
  EXPECT_EQ(ElementCount({0, 5}), 0);
}
