// Table and workload statistics, and the published-statistics parser.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/workload/stats.h"
#include "test_util.h"

namespace embshard {
namespace {

// Bags of one table from per-bag index lists.
TableTrace make_trace(const std::vector<std::vector<int64_t>>& bags) {
  TableTrace t;
  t.offsets.push_back(0);
  for (const auto& bag : bags) {
    t.indices.insert(t.indices.end(), bag.begin(), bag.end());
    t.offsets.push_back(static_cast<int64_t>(t.indices.size()));
  }
  return t;
}

// Row 5 once, 7 twice, 9 three times, 11 five times: bins 0, 1, 2, 3.
TableTrace small_trace() { return make_trace({{5, 7, 9, 11}, {7, 9, 11, 11}, {}, {9, 11, 11}}); }

void expect_small_trace_stats(const TableStats& s) {
  EXPECT_EQ(s.batch_size, 4);
  EXPECT_EQ(s.num_indices, 11);
  EXPECT_EQ(s.unique_rows, 4);
  EXPECT_DOUBLE_EQ(s.pooling_factor(), 11.0 / 4);
  const ReuseCounts rows{1, 1, 1, 1}, lookups{1, 2, 3, 5};
  EXPECT_EQ(s.rows_per_bin, rows);
  EXPECT_EQ(s.lookups_per_bin, lookups);
  const ReuseHistogram row_share = s.row_reuse(), lookup_share = s.lookup_reuse();
  for (int k = 0; k < 4; ++k) {
    EXPECT_DOUBLE_EQ(row_share[k], 0.25);
    EXPECT_DOUBLE_EQ(lookup_share[k], lookups[k] / 11.0);
  }
  for (int k = 4; k < kReuseBins; ++k) EXPECT_EQ(row_share[k] + lookup_share[k], 0.0);
}

TEST(TableStats, ExactBinsDenseSortedAndUnknownRows) {
  const TableTrace trace = small_trace();
  expect_small_trace_stats(compute_table_stats(trace, 12));           // counts array
  expect_small_trace_stats(compute_table_stats(trace, 100'000'000));  // sorted copy
  expect_small_trace_stats(compute_table_stats(trace, 0));            // rows unknown
}

TEST(TableStats, BinEdges) {
  // A row accessed 2^k times sits in bin k; 2^k + 1 times in bin k + 1; the
  // last bin is open-ended.
  for (int k = 1; k < kReuseBins - 1; ++k) {
    const int64_t edge = int64_t{1} << k;
    TableTrace t = make_trace({std::vector<int64_t>(edge, 3), std::vector<int64_t>(edge + 1, 4)});
    const TableStats s = compute_table_stats(t, 10);
    EXPECT_EQ(s.rows_per_bin[k], 1) << "count " << edge;
    EXPECT_EQ(s.rows_per_bin[k + 1], 1) << "count " << edge + 1;
    EXPECT_EQ(s.lookups_per_bin[k + 1], edge + 1);
  }
  const TableStats big = compute_table_stats(make_trace({std::vector<int64_t>(100'000, 0)}), 1);
  EXPECT_EQ(big.rows_per_bin[kReuseBins - 1], 1);
  EXPECT_EQ(big.lookups_per_bin[kReuseBins - 1], 100'000);
}

TEST(TableStats, HundredMillionRowsWithoutRowsSizedArrays) {
  TableTrace t = make_trace({{99'999'999, 0, 50'000'000}, {99'999'999}});
  const TableStats s = compute_table_stats(t, 100'000'000);
  EXPECT_EQ(s.unique_rows, 3);
  EXPECT_EQ(s.rows_per_bin[0], 2);
  EXPECT_EQ(s.rows_per_bin[1], 1);
}

TEST(TableStats, EmptyTableAndOutOfRangeIndex) {
  const TableStats empty = compute_table_stats(make_trace({{}, {}}), 10);
  EXPECT_EQ(empty.num_indices, 0);
  EXPECT_EQ(empty.pooling_factor(), 0.0);
  EXPECT_EQ(empty.row_reuse()[0], 0.0);
  try {
    compute_table_stats(make_trace({{1, 10}}), 10, "table 'ads'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("table 'ads': indices[1] = 10 is out of range [0, 10)"),
              std::string::npos)
        << e.what();
  }
}

TEST(WorkloadStats, AggregatesCountsNotShares) {
  std::vector<TableSpec> specs(2);
  specs[0].rows = 12;
  specs[0].dim = 16;
  specs[1].rows = 1000;
  specs[1].dim = 64;
  const std::vector<TableStats> stats = {
      compute_table_stats(small_trace(), 12),
      compute_table_stats(make_trace({{1, 2}, {3}, {1}}), 1000)};  // batch 3, but B is 4 below
  const WorkloadStats w = aggregate_stats(specs, stats, 4);
  EXPECT_EQ(w.num_indices, 15);
  EXPECT_EQ(w.unique_rows, 7);
  EXPECT_DOUBLE_EQ(w.avg_pooling_factor, 15.0 / (2 * 4));
  EXPECT_DOUBLE_EQ(w.unique_ratio, 7.0 / 15);
  // Rows per bin: table 0 {1, 1, 1, 1}, table 1 {2, 1}: {3, 2, 1, 1} of 7.
  EXPECT_DOUBLE_EQ(w.row_reuse[0], 3.0 / 7);
  EXPECT_DOUBLE_EQ(w.row_reuse[1], 2.0 / 7);
  EXPECT_DOUBLE_EQ(w.row_reuse[3], 1.0 / 7);
  // Lookups per bin: {1, 2, 3, 5} + {2, 2}: {3, 4, 3, 5} of 15.
  EXPECT_DOUBLE_EQ(w.lookup_reuse[0], 3.0 / 15);
  EXPECT_DOUBLE_EQ(w.lookup_reuse[1], 4.0 / 15);
  EXPECT_DOUBLE_EQ(w.lookup_reuse[3], 5.0 / 15);
  EXPECT_EQ(w.weight_bytes, (12 * 16 + 1000 * 64) * 4);
  EXPECT_EQ(w.rows.min, 12);
  EXPECT_EQ(w.rows.median, 506);
  EXPECT_EQ(w.dims.max, 64);
}

TEST(WorkloadStats, SpecRoundTrip) {
  TableSpec spec;
  spec.rows = 12;
  spec.dim = 8;
  fill_table_spec(compute_table_stats(small_trace(), 12), spec);
  const TableStats back = table_stats_from_spec(spec, 4);
  const TableStats direct = compute_table_stats(small_trace(), 12);
  EXPECT_EQ(back.num_indices, direct.num_indices);
  EXPECT_EQ(back.rows_per_bin, direct.rows_per_bin);
  EXPECT_EQ(back.lookups_per_bin, direct.lookups_per_bin);
}

// ---- published statistics ----------------------------------------------------

std::string temp_file(const std::string& name, const std::string& text) {
  static const testing::ScratchDir dir("stats");  // removed when the tests exit
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

// One block in the published format with the given numbers.
std::string block(const std::string& name, int64_t batch, int64_t indices, int64_t unique,
                  const ReuseHistogram& rows, const ReuseHistogram& lookups) {
  std::ostringstream out;
  out << name << "\nLocality stats after processing 1 batches of size " << batch
      << "\nAvg # of indices: " << indices << "\nAvg # of unique cols: " << unique
      << "\nAvg col size: 1.0\nHistogram of col sizes:\n";
  for (int k = 0; k < kReuseBins; ++k) out << reuse_bin_label(k) << ": " << rows[k] << "\n";
  out << "[0, 1, 2]\n['0.000', '1.000']\nRatio of index distribution at different column sizes:\n";
  for (int k = 0; k < kReuseBins; ++k) out << reuse_bin_label(k) << ": " << lookups[k] << "\n";
  out << "[0, 1, 2]\n['0.000', '1.000']\n\n";
  return out.str();
}

ReuseHistogram one_hot_histogram(int bin) {
  ReuseHistogram h{};
  h[bin] = 1.0;
  return h;
}

TEST(PublishedStats, MeanOverBlocksForSplitFiles) {
  const std::string path = temp_file(
      "split.txt", block("fbgemm_t10_bs100_0.pt", 100, 3000, 1000, one_hot_histogram(0),
                         one_hot_histogram(1)) +
                       block("fbgemm_t10_bs100_1.pt", 100, 5000, 500, one_hot_histogram(2),
                             one_hot_histogram(1)));
  const PublishedStats p = load_published_stats(path, "2022");
  EXPECT_EQ(p.num_blocks, 2);
  EXPECT_EQ(p.num_tables, 10);
  EXPECT_EQ(p.batch_size, 100);
  EXPECT_DOUBLE_EQ(p.avg_indices, 4000);
  EXPECT_DOUBLE_EQ(p.avg_unique, 750);
  EXPECT_DOUBLE_EQ(p.avg_pooling_factor, 4000.0 / (10 * 100));
  EXPECT_DOUBLE_EQ(p.unique_ratio, 750.0 / 4000);
  EXPECT_DOUBLE_EQ(p.row_reuse[0], 0.5);
  EXPECT_DOUBLE_EQ(p.row_reuse[2], 0.5);
  EXPECT_DOUBLE_EQ(p.lookup_reuse[1], 1.0);
}

void expect_consistent(const PublishedStats& p, int64_t tables, int64_t batch) {
  EXPECT_EQ(p.num_tables, tables);
  EXPECT_EQ(p.batch_size, batch);
  EXPECT_DOUBLE_EQ(p.avg_pooling_factor, p.avg_indices / (double(tables) * batch));
  EXPECT_DOUBLE_EQ(p.unique_ratio, p.avg_unique / p.avg_indices);
  double rows = 0, lookups = 0;
  for (int k = 0; k < kReuseBins; ++k) rows += p.row_reuse[k], lookups += p.lookup_reuse[k];
  EXPECT_NEAR(rows, 1.0, 0.01);
  EXPECT_NEAR(lookups, 1.0, 0.01);
  // Bin 0 holds rows read once: its lookup share is its row share x unique ratio.
  EXPECT_NEAR(p.lookup_reuse[0], p.row_reuse[0] * p.unique_ratio, 0.001);
}

TEST(PublishedStats, RealFiles) {
  const std::string dir = default_published_stats_dir();
  const PublishedStats p2021 = load_published_profile("2021", dir);
  EXPECT_EQ(p2021.dataset, "fbgemm_t856_bs65536.pt");
  EXPECT_EQ(p2021.num_blocks, 1);
  EXPECT_DOUBLE_EQ(p2021.avg_indices, 887017990);  // first block's "Avg # of indices"
  EXPECT_DOUBLE_EQ(p2021.avg_unique, 128435723);
  EXPECT_DOUBLE_EQ(p2021.row_reuse[0], 0.473);
  EXPECT_DOUBLE_EQ(p2021.lookup_reuse[kReuseBins - 1], 0.019);
  expect_consistent(p2021, 856, 65536);

  const PublishedStats p2022 = load_published_profile("2022", dir);
  EXPECT_EQ(p2022.num_blocks, 16);  // fbgemm_t788_bs131072_0.pt .. _15.pt
  expect_consistent(p2022, 788, 131072);
  EXPECT_GT(p2022.avg_indices, 1.405e9);
  EXPECT_LT(p2022.avg_indices, 1.406e9);
}

void expect_error(const std::string& path, const std::string& profile, const std::string& needle) {
  try {
    load_published_stats(path, profile);
    FAIL() << "expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PublishedStats, MalformedFilesNameFileLineAndValue) {
  std::string good = block("fbgemm_t10_bs100.pt", 100, 3000, 1000, one_hot_histogram(0),
                           one_hot_histogram(0));
  std::string bad_number = std::regex_replace(good, std::regex("indices: 3000"), "indices: 3e");
  const std::string p1 = temp_file("bad_number.txt", bad_number);
  expect_error(p1, "2022", p1 + ":3: 'Avg # of indices:' is followed by '3e'");

  std::string missing_bin = std::regex_replace(good, std::regex("\\(4, 8\\]: 0\n"), "");
  const std::string p2 = temp_file("missing_bin.txt", missing_bin);
  expect_error(p2, "2022", p2 + ":10: expected a line starting with '(4, 8]:', found '(8, 16]: 0'");

  const std::string p3 = temp_file("wrong_block.txt", good);
  expect_error(p3, "2021", "profile 2021 needs exactly one block 'fbgemm_t856_bs65536.pt'");
  expect_error(p3, "2020", "unknown profile '2020' (valid profiles: 2021, 2022)");
  expect_error(p3 + ".missing", "2021", "not found");

  std::string wrong_batch = std::regex_replace(good, std::regex("size 100"), "size 64");
  const std::string p4 = temp_file("wrong_batch.txt", wrong_batch);
  expect_error(p4, "2022", p4 + ":2: batch size '64' disagrees with the file name");
}

}  // namespace
}  // namespace embshard
