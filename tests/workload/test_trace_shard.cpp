// Row shards and batch slices of a trace against a direct reference on
// random traces: every lookup lands in exactly one row shard, remapped; a
// slice keeps its samples' bags only; the lookup shares add up; a row range's
// counts from the sorted indices (row_range_stats, PieceStats) are those of
// its bucketized trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "embshard/util/error.h"
#include "embshard/workload/trace_shard.h"
#include "test_util.h"

namespace embshard {
namespace {

// Bags of 0-6 lookups; with `hot`, half of them on the first 1% of rows, so
// that the higher reuse bins fill.
TableTrace random_trace(int64_t batch, int64_t rows, uint64_t seed, bool hot = false) {
  std::mt19937_64 rng(seed);
  TableTrace t;
  t.offsets.push_back(0);
  const int64_t hot_rows = std::max<int64_t>(1, rows / 100);
  for (int64_t b = 0; b < batch; ++b) {
    const int n = static_cast<int>(rng() % 7);
    for (int i = 0; i < n; ++i) {
      const bool h = hot && rng() % 2 == 0;
      t.indices.push_back(static_cast<int64_t>(rng() % (h ? hot_rows : rows)));
    }
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

void expect_same_counts(const TableStats& got, const TableStats& want, const std::string& what) {
  EXPECT_EQ(got.batch_size, want.batch_size) << what;
  EXPECT_EQ(got.num_indices, want.num_indices) << what;
  EXPECT_EQ(got.unique_rows, want.unique_rows) << what;
  EXPECT_EQ(got.rows_per_bin, want.rows_per_bin) << what;
  EXPECT_EQ(got.lookups_per_bin, want.lookups_per_bin) << what;
}

TEST(TraceShard, RowRangeStatsMatchTheBucketizedTrace) {
  for (const uint64_t seed : {21, 22, 23}) {
    for (const bool hot : {false, true}) {
      const int64_t rows = 5000;
      const TableTrace t = random_trace(4096, rows, seed, hot);
      std::vector<int64_t> sorted = t.indices;
      std::sort(sorted.begin(), sorted.end());
      std::mt19937_64 rng(seed);
      // Blocks of 2 and 7, the first and last row alone, the whole table, a
      // range past every lookup, random ranges.
      std::vector<std::pair<int64_t, int64_t>> ranges{{0, rows}, {0, 1}, {rows - 1, 1}};
      for (const int64_t k : {2, 7}) {
        const int64_t block = (rows + k - 1) / k;
        for (int64_t o = 0; o < rows; o += block) ranges.emplace_back(o, std::min(block, rows - o));
      }
      for (int i = 0; i < 20; ++i) {
        const int64_t o = static_cast<int64_t>(rng() % rows);
        ranges.emplace_back(o, 1 + static_cast<int64_t>(rng() % (rows - o)));
      }
      for (const auto& [o, n] : ranges) {
        const std::string what = "seed " + std::to_string(seed) + " rows [" + std::to_string(o) +
                                 ", +" + std::to_string(n) + ")";
        expect_same_counts(row_range_stats(sorted, t.batch_size(), o, n),
                           compute_table_stats(row_shard_trace(t, o, n), n), what);
      }
      if (hot) {  // the hot range does reach the high bins the test is for
        const TableStats all = row_range_stats(sorted, t.batch_size(), 0, rows);
        int64_t high = 0;
        for (int b = 5; b < kReuseBins; ++b) high += all.rows_per_bin[b];
        EXPECT_GT(high, 0);
      }
    }
  }
  const std::vector<int64_t> none;
  EXPECT_EQ(row_range_stats(none, 8, 0, 10).unique_rows, 0);
  EXPECT_THROW(row_range_stats(none, 8, 0, 0), Error);
  EXPECT_THROW(row_range_stats(none, 8, -1, 5), Error);
}

// The radix sort against std::sort: random indices of tables from 1 row to
// 2^40 rows (one to four passes), runs of equal rows, the edge cases.
TEST(TraceShard, SortRowsMatchesStdSort) {
  std::mt19937_64 rng(41);
  for (const int64_t rows : {int64_t{1}, int64_t{7}, int64_t{2048}, int64_t{2049}, int64_t{3} << 22,
                             int64_t{20'000'000}, int64_t{1} << 40}) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{1000}, size_t{50'000}}) {
      std::vector<int64_t> got(n);
      for (int64_t& r : got) r = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
      if (n > 10) got[n / 2] = rows - 1, got[n / 3] = 0;
      std::vector<int64_t> want = got;
      std::sort(want.begin(), want.end());
      sort_rows(got);
      EXPECT_EQ(got, want) << rows << " rows, " << n << " indices";
    }
  }
  std::vector<int64_t> negative = {3, -1, 2};
  EXPECT_THROW(sort_rows(negative), Error);
}

TEST(TraceShard, PieceStatsAreTheMeasuredPieces) {
  testing::ScratchDir dir("piece_stats");
  const std::string path = dir.file("trace.bin");
  const int64_t rows0 = 3000, rows1 = 800;
  const TableTrace t0 = random_trace(512, rows0, 31, true), t1 = random_trace(512, rows1, 32);
  {
    TraceWriter writer(path, 2, 512, 4);
    writer.add_table(t0);
    writer.add_table(t1);
    writer.finish();
  }
  TableSpec spec0, spec1;
  spec0.name = "hot";
  spec0.rows = rows0;
  spec0.dim = 32;
  spec1.name = "cold";
  spec1.rows = rows1;
  spec1.dim = 8;
  PieceStats stats(path);
  // Both tables' blocks in turn (the held trace changes), a replica slice.
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t o = 0; o < rows0; o += 1500) {
      const TableSpec got = stats.piece(0, spec0, o, 1500);
      TableSpec want = spec0;
      fill_table_spec(compute_table_stats(row_shard_trace(t0, o, 1500), 1500), want);
      EXPECT_EQ(got.rows, 1500);
      EXPECT_EQ(got.dim, 32);
      EXPECT_EQ(got.name, "hot");
      EXPECT_EQ(got.pooling_factor, want.pooling_factor);
      EXPECT_EQ(got.unique_rows, want.unique_rows);
      EXPECT_EQ(got.row_reuse, want.row_reuse);
      EXPECT_EQ(got.lookup_reuse, want.lookup_reuse);
    }
    const TableSpec slice = stats.piece(1, spec1, 0, rows1, 1, 4);
    TableSpec want = spec1;
    fill_table_spec(compute_table_stats(batch_slice_trace(t1, 1, 4), rows1), want);
    EXPECT_EQ(slice.pooling_factor, want.pooling_factor);
    EXPECT_EQ(slice.row_reuse, want.row_reuse);
  }
  // The first block of the hot table holds its hot rows: its reuse differs
  // from the whole table's.
  TableSpec whole = spec0;
  fill_table_spec(compute_table_stats(t0, rows0), whole);
  EXPECT_NE(stats.piece(0, spec0, 0, 1500).row_reuse, whole.row_reuse);
  // A row range's share of the lookups is counted, whichever table was held.
  for (const auto& [offset, rows] : {std::pair<int64_t, int64_t>{0, 1500}, {1500, 1500}, {10, 7}}) {
    int64_t in_range = 0;
    for (int64_t row : t0.indices) in_range += row >= offset && row < offset + rows;
    stats.piece(1, spec1, 0, rows1, 1, 4);
    EXPECT_DOUBLE_EQ(stats.lookup_share(0, spec0, offset, rows),
                     static_cast<double>(in_range) / static_cast<double>(t0.indices.size()));
  }
  EXPECT_GT(stats.lookup_share(0, spec0, 0, 1500), 0.5);  // the hot rows are in the first half

  EXPECT_NE(testing::error_of([&] { stats.piece(0, spec0, 2000, 1500); }).find("('hot'): rows [2000, 3500) are not a range of its 3000 rows"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { stats.piece(2, spec0, 0, 10); }).find("table 2 ('hot') is not in it"),
            std::string::npos);
  TableSpec narrow = spec1;
  narrow.rows = 100;  // the trace has rows up to 800
  const std::string e = testing::error_of([&] { stats.piece(1, narrow, 0, 50); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("outside its rows [0, 100)"), std::string::npos) << e;
}

}  // namespace
}  // namespace embshard
