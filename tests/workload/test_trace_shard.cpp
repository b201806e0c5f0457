// Row shards and batch slices of a trace against a direct reference on
// random traces: every lookup lands in exactly one row shard, remapped; a
// slice keeps its samples' bags only; the lookup shares add up.
#include <gtest/gtest.h>

#include <random>

#include "embshard/util/error.h"
#include "embshard/workload/trace_shard.h"

namespace embshard {
namespace {

TableTrace random_trace(int64_t batch, int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TableTrace t;
  t.offsets.push_back(0);
  for (int64_t b = 0; b < batch; ++b) {
    const int n = static_cast<int>(rng() % 7);
    for (int i = 0; i < n; ++i) t.indices.push_back(static_cast<int64_t>(rng() % rows));
    t.offsets.push_back(static_cast<int64_t>(t.indices.size()));
  }
  return t;
}

TEST(TraceShard, RowShardsPartitionTheLookupsBagByBag) {
  const int64_t rows = 1000, batch = 257;
  const TableTrace t = random_trace(batch, rows, 11);
  const int64_t block = 334;  // 3 blocks: 334, 334, 332
  size_t total = 0;
  for (int64_t offset = 0; offset < rows; offset += block) {
    const int64_t n = std::min(block, rows - offset);
    const TableTrace s = row_shard_trace(t, offset, n);
    ASSERT_EQ(s.batch_size(), batch);
    validate_trace(s, n, "row shard");
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<int64_t> expect;
      for (int64_t i = t.offsets[b]; i < t.offsets[b + 1]; ++i) {
        if (t.indices[i] >= offset && t.indices[i] < offset + n) expect.push_back(t.indices[i] - offset);
      }
      const std::vector<int64_t> got(s.indices.begin() + s.offsets[b], s.indices.begin() + s.offsets[b + 1]);
      ASSERT_EQ(got, expect) << "bag " << b;
    }
    total += s.indices.size();
  }
  EXPECT_EQ(total, t.indices.size());
  EXPECT_THROW(row_shard_trace(t, 10, 0), Error);
}

TEST(TraceShard, BatchSliceKeepsItsSamplesOnly) {
  const TableTrace t = random_trace(100, 50, 12);
  size_t total = 0;
  for (int slice = 0; slice < 3; ++slice) {
    const TableTrace s = batch_slice_trace(t, slice, 3);
    ASSERT_EQ(s.batch_size(), 100);
    for (int64_t b = 0; b < 100; ++b) {
      const bool mine = b >= 100 * slice / 3 && b < 100 * (slice + 1) / 3;
      const int64_t len = s.offsets[b + 1] - s.offsets[b];
      EXPECT_EQ(len, mine ? t.offsets[b + 1] - t.offsets[b] : 0) << b;
    }
    total += s.indices.size();
  }
  EXPECT_EQ(total, t.indices.size());
  EXPECT_THROW(batch_slice_trace(t, 3, 3), Error);
}

TEST(TraceShard, LookupSharesCountIndicesPerRowBin) {
  TableTrace t;
  t.offsets = {0, 4};
  t.indices = {0, 1, 2, 99};
  const std::vector<double> s = row_lookup_shares(t, 100, 4);  // bins of 25 rows
  EXPECT_EQ(s, (std::vector<double>{0.75, 0, 0, 0.25}));
  t.indices = {0, 1, 2, 100};
  t.offsets = {0, 4};
  EXPECT_THROW(row_lookup_shares(t, 100, 4), Error);
}

}  // namespace
}  // namespace embshard
