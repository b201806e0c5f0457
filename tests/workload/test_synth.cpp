// The synthetic workload generator: calibration to the published statistics,
// determinism, one-table-at-a-time generation, option checks.
#include <gtest/gtest.h>


#include <algorithm>
#include <filesystem>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/synth.h"
#include "embshard/workload/table_specs.h"
#include "test_util.h"

namespace embshard {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  static const testing::ScratchDir root("synth");  // removed when the tests exit
  const fs::path dir = root.path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

SynthOptions options(const std::string& profile, uint64_t seed, int64_t tables = 100,
                     int64_t batch = 4096) {
  SynthOptions o;
  o.profile = profile;
  o.seed = seed;
  o.num_tables = tables;
  o.batch_size = batch;
  return o;
}

// Statistics recomputed from the trace file, independently of the generator.
WorkloadStats measure(const Workload& w) {
  const Workload loaded = load_workload(w.dir);
  TraceReader reader(loaded.trace_path());
  std::vector<TableStats> stats;
  for (size_t t = 0; t < loaded.tables.size(); ++t) {
    const TableTrace trace = reader.read_table(t);
    validate_trace(trace, loaded.tables[t].rows, loaded.tables[t].name);
    stats.push_back(compute_table_stats(trace, loaded.tables[t].rows));
    EXPECT_EQ(stats.back().unique_rows, loaded.tables[t].unique_rows) << loaded.tables[t].name;
  }
  return aggregate_stats(loaded.tables, stats, loaded.batch_size);
}

void expect_calibrated(const std::string& profile, uint64_t seed, int64_t tables, int64_t batch) {
  const PublishedStats target = load_published_profile(profile);
  const Workload w = synthesize_workload(options(profile, seed, tables, batch), target,
                                         temp_dir(profile + "_" + std::to_string(seed)));
  const WorkloadStats measured = measure(w);
  const PublishedComparison c = compare_to_published(measured, target);
  SCOPED_TRACE(fmt::format("profile {} seed {} T={} B={}", profile, seed, tables, batch));
  EXPECT_LE(c.row_reuse_tv, 0.05);
  EXPECT_LE(c.lookup_reuse_tv, 0.05);
  EXPECT_LE(std::fabs(c.pooling_rel_error), 0.05);
  EXPECT_LE(std::fabs(c.unique_ratio_rel_error), 0.05);
  // Heavy tails: one-hot tables next to tables with pooling in the tens or
  // hundreds; tables from hundreds of rows to millions.
  EXPECT_LE(measured.pooling.min, 1.1);
  EXPECT_GE(measured.pooling.max, 50);
  EXPECT_LE(measured.rows.min, 1000);
  EXPECT_GE(measured.rows.max, 1e6);
  fs::remove_all(w.dir);
}

TEST(Synth, Calibrated2021) {
  for (uint64_t seed : {1, 2, 3}) expect_calibrated("2021", seed, 100, 4096);
}

TEST(Synth, Calibrated2022) {
  for (uint64_t seed : {1, 2, 3}) expect_calibrated("2022", seed, 100, 4096);
}

TEST(Synth, CalibratedAtOtherSizes) {
  expect_calibrated("2021", 11, 300, 1024);
  expect_calibrated("2022", 12, 100, 16384);
}

TEST(Synth, SameSeedSameBytesOtherSeedOtherBytes) {
  const PublishedStats target = load_published_profile("2022");
  const Workload a = synthesize_workload(options("2022", 5, 20, 512), target, temp_dir("a"));
  const Workload b = synthesize_workload(options("2022", 5, 20, 512), target, temp_dir("b"));
  const Workload c = synthesize_workload(options("2022", 6, 20, 512), target, temp_dir("c"));
  EXPECT_EQ(read_file(a.trace_path()), read_file(b.trace_path()));
  EXPECT_EQ(read_file(a.dir + "/tables.json"), read_file(b.dir + "/tables.json"));
  EXPECT_NE(read_file(a.trace_path()), read_file(c.trace_path()));
}

TEST(Synth, TablesAreGeneratedOneAtATimeAndIndependently) {
  const SynthPlan plan = plan_synth(options("2021", 9, 12, 256), load_published_profile("2021"));
  const std::string path = temp_dir("one_at_a_time") + "/trace.bin";
  {
    TraceWriter writer(path, plan.tables.size(), 256, 4);
    size_t calls = 0;
    const auto specs = write_synth_traces(plan, writer, [&](size_t t, size_t count, const TableSpec& s) {
      EXPECT_EQ(t, calls++);
      EXPECT_EQ(count, plan.tables.size());
      EXPECT_EQ(s.name, plan.tables[t].name);
    });
    writer.finish();
    EXPECT_EQ(calls, plan.tables.size());
  }
  TraceReader reader(path);
  // Any table can be regenerated alone, without the ones before it.
  for (size_t t : {size_t{7}, size_t{0}}) {
    const TableTrace alone = generate_table_trace(plan, t);
    const TableTrace stored = reader.read_table(t);
    EXPECT_EQ(alone.indices, stored.indices);
    EXPECT_EQ(alone.offsets, stored.offsets);
    EXPECT_EQ(static_cast<int64_t>(alone.indices.size()), plan.tables[t].num_indices());
    const TableStats s = compute_table_stats(alone, plan.tables[t].rows);
    EXPECT_EQ(s.rows_per_bin, plan.tables[t].rows_per_bin);
    EXPECT_EQ(s.lookups_per_bin, plan.tables[t].lookups_per_bin);
  }
}

TEST(Synth, SkewVariesAcrossTables) {
  const SynthPlan plan = plan_synth(options("2021", 1), load_published_profile("2021"));
  std::vector<double> singleton_share;
  for (const SynthTablePlan& t : plan.tables) {
    if (t.num_indices() > 0) {
      singleton_share.push_back(double(t.lookups_per_bin[0]) / t.num_indices());
    }
  }
  const auto [lo, hi] = std::minmax_element(singleton_share.begin(), singleton_share.end());
  EXPECT_LT(*lo, 0.02);
  EXPECT_GT(*hi, 0.2);
}

void expect_invalid(const SynthOptions& o, const std::string& needle) {
  try {
    validate_synth_options(o);
    FAIL() << "expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Synth, OptionChecks) {
  expect_invalid(options("2020", 1), "unknown profile '2020' (valid profiles: 2021, 2022)");
  expect_invalid(options("2021", 1, 0), "--tables is 0, must be in 1..1000000");
  expect_invalid(options("2021", 1, 99'999'999'999), "--tables is 99999999999, must be in 1..");
  expect_invalid(options("2021", 1, 10, -5), "--batch is -5, must be in 1..2147483648");
  expect_invalid(options("2021", 1, 10, kMaxBatch + 1), "--batch is 2147483649");
  SynthOptions o = options("2021", 1);
  o.dims = {16, 2048};
  expect_invalid(o, "--dims value 2048 is out of range 1..1024");
  o.dims = {};
  expect_invalid(o, "--dims is empty");
  o = options("2021", 1);
  o.index_bytes = 2;
  expect_invalid(o, "--index-bytes is 2, must be 4 or 8");
  o = options("2021", 1);
  o.huge_tables = 1;
  o.huge_rows = 3'000'000'000;
  expect_invalid(o, "--huge-rows 3000000000 is more than 4-byte indices hold; use --index-bytes 8");
  o.index_bytes = 8;
  o.huge_rows = kMaxRows + 1;
  expect_invalid(o, "--huge-tables 1 needs --huge-rows in 1..1099511627776 (it is 1099511627777)");
}

TEST(Synth, TinyWorkloadsStayValid) {
  // Too small to hold the high reuse bins: they fold into lower bins, and the
  // result is still a valid workload with the right number of lookups.
  const PublishedStats target = load_published_profile("2022");
  for (int64_t batch : {1, 7, 64}) {
    const Workload w = synthesize_workload(options("2022", 3, 2, batch), target,
                                           temp_dir("tiny" + std::to_string(batch)));
    const WorkloadStats s = measure(w);
    EXPECT_EQ(s.num_indices, std::llround(target.avg_pooling_factor * 2 * batch));
  }
}

double tv_distance(const ReuseHistogram& a, const ReuseHistogram& b) {
  double d = 0;
  for (int k = 0; k < kReuseBins; ++k) d += std::fabs(a[k] - b[k]);
  return d / 2;
}

// synth --spec: every table of a spec file, one for one, with its own rows,
// dim, pooling factor, distinct rows and reuse histograms (the profile's
// where the spec gives none), and the same bytes for the same seed. A table
// with few lookups cannot hold the top reuse bins' rows: their lookups fold
// into fewer rows, so its histogram is checked only past 200,000 lookups.
TEST(Synth, FromSpecsFollowsEachTable) {
  const Workload specs = parse_table_specs(R"({"batch_size": 4096, "profile": "2022", "tables": [
      {"name": "user", "rows": 50000000, "dim": 128, "pooling_factor": 1},
      {"name": "history", "rows": 2000000, "dim": 64, "pooling_factor": 80},
      {"name": "query", "rows": 300000, "dim": 32, "pooling_factor": 20},
      {"name": "tiny", "rows": 10, "dim": 4, "pooling_factor": 3}]})",
                                           "specs.json");
  const Workload w = synthesize_from_specs(specs, 5, 4, temp_dir("from_specs"));
  const Workload loaded = load_workload(w.dir);
  ASSERT_EQ(loaded.tables.size(), specs.tables.size());
  EXPECT_EQ(loaded.batch_size, 4096);
  TraceReader reader(loaded.trace_path());
  for (size_t t = 0; t < specs.tables.size(); ++t) {
    const TableSpec& want = specs.tables[t];
    SCOPED_TRACE(want.name);
    const TableTrace trace = reader.read_table(t);
    validate_trace(trace, loaded.tables[t].rows, want.name);
    const TableStats got = compute_table_stats(trace, loaded.tables[t].rows);
    EXPECT_EQ(loaded.tables[t].name, want.name);
    EXPECT_EQ(loaded.tables[t].rows, want.rows);
    EXPECT_EQ(loaded.tables[t].dim, want.dim);
    EXPECT_NEAR(got.pooling_factor(), want.pooling_factor, 0.001 * want.pooling_factor);
    if (want.rows > 10) EXPECT_NEAR(got.unique_rows, want.unique_rows, 0.05 * want.unique_rows);
    if (want.pooling_factor * 4096 > 200'000) {
      EXPECT_LE(tv_distance(got.lookup_reuse(), want.lookup_reuse), 0.05);
    }
  }
  const Workload again = synthesize_from_specs(specs, 5, 4, temp_dir("from_specs_again"));
  EXPECT_EQ(read_file(w.trace_path()), read_file(again.trace_path()));
}

}  // namespace
}  // namespace embshard
