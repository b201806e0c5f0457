// Physical floors: the bytes fused work must move, and the checks against them.
#include <gtest/gtest.h>

#include "cost_test_util.h"
#include "embshard/cost/floor.h"

namespace embshard {
namespace {

TEST(Floor, FusedWorkCountsRowsStateAndOutputsByHand) {
  // batch 100 x pooling 2 = 200 lookups of 200 distinct rows of 16 fp32.
  const WorkBytes b =
      fused_work_bytes(testing::uniform_table(1000, 16, 2), 100, DataType::kFp32, 4);
  EXPECT_DOUBLE_EQ(b.rows, 2 * 200 * 16 * 4);     // read once, written once
  EXPECT_DOUBLE_EQ(b.state, 2 * 200 * 4);         // one fp32 per row, read and written
  EXPECT_DOUBLE_EQ(b.outputs, 2 * 100 * 16 * 4);  // pooled outputs and their gradients
  EXPECT_DOUBLE_EQ(b.total(), b.rows + b.state + b.outputs);
  // SGD keeps no state; fp16 weights move half the row bytes.
  EXPECT_DOUBLE_EQ(
      fused_work_bytes(testing::uniform_table(1000, 16, 2), 100, DataType::kFp16, 0).total(),
      2 * 200 * 16 * 2 + 2 * 100 * 16 * 4);
}

TEST(Floor, DistinctRowsNeverExceedTheTableAndAReplicaWritesItsSlice) {
  // 10,000 lookups of a 50-row table: 50 distinct rows at most.
  EXPECT_DOUBLE_EQ(
      fused_work_bytes(testing::uniform_table(50, 8, 100), 100, DataType::kFp32, 4).rows,
      2 * 50 * 8 * 4);
  TableFeatures replica =
      testing::uniform_table(1000, 8, 0.5);  // a quarter of the lookups of pooling 2
  replica.batch_slices = 4;
  EXPECT_DOUBLE_EQ(fused_work_bytes(replica, 400, DataType::kFp32, 4).outputs, 2 * 100 * 8 * 4);
  EXPECT_DOUBLE_EQ(fused_work_bytes(replica, 400, DataType::kFp32, 4).rows, 2 * 200 * 8 * 4);
  EXPECT_DOUBLE_EQ(
      fused_work_bytes(testing::uniform_table(1000, 8, 0), 400, DataType::kFp32, 4).rows, 0);
}

TEST(Floor, MillisecondsAndTheAllToAllsBusierDirection) {
  EXPECT_DOUBLE_EQ(floor_ms(1e9, 1), 1000);
  EXPECT_DOUBLE_EQ(floor_ms(1e9, 0), 0);  // unknown bandwidth: no floor
  EXPECT_DOUBLE_EQ(alltoall_floor_bytes(10, 30, 1, 8), 0);
  // 2 devices, batch 8: sends 4 samples x 10 dims x 4 bytes, receives 4 x 20 x 4.
  EXPECT_DOUBLE_EQ(alltoall_floor_bytes(10, 30, 2, 8), 320);
  EXPECT_DOUBLE_EQ(alltoall_floor_bytes(20, 30, 2, 8), 320);
  EXPECT_DOUBLE_EQ(alltoall_floor_bytes(30, 30, 2, 8), 480);
}

TEST(Floor, ChecksUnderWithinAndFarOver) {
  EXPECT_EQ(check_floor(0.9, 1), FloorCheck::kUnder);
  EXPECT_EQ(check_floor(1, 1), FloorCheck::kWithin);
  EXPECT_EQ(check_floor(kFarOverFloor, 1), FloorCheck::kWithin);
  EXPECT_EQ(check_floor(kFarOverFloor * 1.01, 1), FloorCheck::kFarOver);
  EXPECT_EQ(check_floor(1e-9, 0), FloorCheck::kWithin);  // no floor
}

}  // namespace
}  // namespace embshard
