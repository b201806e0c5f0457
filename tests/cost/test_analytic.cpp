#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "cost_test_util.h"
#include "embshard/cost/analytic/calibrate.h"
#include "embshard/cost/analytic/model.h"
#include "embshard/cost/analytic/terms.h"
#include "embshard/util/nnls.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::ScratchDir;

// Hand-made coefficients: every term costs something, so monotonicity in each
// input is strict where the input changes a term.
Calibration hand_calibration() {
  Calibration c;
  c.machine_cpu = "test cpu";
  c.batch_size = 1024;
  c.cache_bytes = 1 << 20;
  c.fwd_call_us = 5, c.fwd_per_table_us = 2, c.fwd_per_lookup_ns = 1;
  c.dram_gather_gbps = 5, c.cache_gather_gbps = 40, c.seq_gbps = 10;
  c.generic_dim_ns_per_element = 0.5;
  c.fwd_page_walk_ns = 50, c.bwd_page_walk_ns = 80;
  c.bwd_call_us = 8, c.bwd_per_table_us = 3, c.bwd_per_lookup_ns = 2;
  c.sort_ns_per_lookup_pass = 1, c.grad_read_gbps = 30;
  c.dram_update_gbps = 4, c.cache_update_gbps = 20;
  c.comm_latency_us = 10, c.comm_gbps = 1;
  c.fwd_convert_ns = {0.5, 0.25, 1, 2};
  c.fwd_convert_lookup_ns = {0, 3, 5, 9};
  return c;
}

double single_ms(ComputeModel& m, const TableFeatures& t) {
  const int id = m.add_table(t);
  return m.compute_ms(std::span<const int>(&id, 1));
}

TEST(AnalyticModel, MonotoneInLookupsDimAndRows) {
  auto m = make_analytic_compute_model(hand_calibration(), 0);
  EXPECT_EQ(m->batch_size(), 1024);
  double last = 0;
  for (double pooling : {0.5, 1.0, 4.0, 16.0, 64.0}) {
    const double ms = single_ms(*m, testing::uniform_table(1 << 20, 32, pooling));
    EXPECT_GT(ms, last) << "pooling " << pooling;
    last = ms;
  }
  // Within the specialised dims and within the generic ones (the executor's
  // generic path makes dim 4 slower than dim 8, and the model knows it).
  for (auto dims : {std::vector<int>{8, 16, 32, 64, 128}, std::vector<int>{4, 24, 200, 512}}) {
    last = 0;
    for (int dim : dims) {
      const double ms = single_ms(*m, testing::uniform_table(1 << 20, dim, 8));
      EXPECT_GT(ms, last) << "dim " << dim;
      last = ms;
    }
  }
  last = 0;
  for (int64_t rows : {64, 1000, 4000, 1 << 16, 1 << 24}) {
    const double ms = single_ms(*m, testing::uniform_table(rows, 64, 8));
    EXPECT_GE(ms, last) << "rows " << rows;
    last = ms;
  }
  EXPECT_GT(last, single_ms(*m, testing::uniform_table(64, 64, 8)));
}

TEST(AnalyticModel, FusedShardCostsMoreThanItsLargestTableAndIsFinite) {
  auto m = make_analytic_compute_model(hand_calibration(), 2048);
  const int a = m->add_table(testing::uniform_table(1 << 20, 64, 8));
  const int b = m->add_table(testing::uniform_table(1 << 22, 16, 20));
  const std::vector<int> both = {a, b};
  const double ab = m->compute_ms(both);
  EXPECT_TRUE(std::isfinite(ab));
  EXPECT_GT(ab, m->compute_ms(std::span<const int>(&a, 1)));
  EXPECT_GT(ab, m->compute_ms(std::span<const int>(&b, 1)));
  EXPECT_EQ(m->compute_ms(std::span<const int>()), 0.0);
  const std::vector<int> bad = {7};
  EXPECT_THROW(m->compute_ms(bad), Error);
  TableFeatures nan_table = testing::uniform_table(10, 4, std::numeric_limits<double>::quiet_NaN());
  EXPECT_THROW(m->add_table(nan_table), Error);
}

// The search's incremental state gives the same cost as compute_ms, in any
// order of adding the tables.
TEST(AnalyticModel, IncrementalStateEqualsComputeMs) {
  auto model = make_analytic_compute_model(hand_calibration(), 4096);
  std::mt19937_64 rng(6);
  std::vector<int> ids;
  for (int i = 0; i < 12; ++i) {
    TableFeatures t;
    t.rows = 1000 + static_cast<int64_t>(rng() % 5000000);
    t.dim = 4 * (1 + static_cast<int>(rng() % 64));
    t.pooling_factor = 1 + static_cast<double>(rng() % 40);
    t.row_reuse[0] = t.lookup_reuse[0] = 0.5;
    t.row_reuse[3] = t.lookup_reuse[5] = 0.5;
    ids.push_back(model->add_table(t));
  }
  std::vector<double> state(model->state_size());
  ASSERT_GT(state.size(), 0u);
  EXPECT_EQ(model->state_ms(state), 0.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(ids.begin(), ids.end(), rng);
    const std::span<const int> shard(ids.data(), 1 + trial % ids.size());
    std::fill(state.begin(), state.end(), 0.0);
    for (int id : shard) model->add_to_state(id, state);
    EXPECT_NEAR(model->state_ms(state), model->compute_ms(shard), 1e-12 * model->compute_ms(shard));
  }
  EXPECT_THROW(model->add_to_state(99, state), Error);
}

TEST(AnalyticModel, DistinctRowsFromHistograms) {
  TableFeatures t = testing::uniform_table(1 << 20, 16, 4);
  t.row_reuse = {};
  t.lookup_reuse = {};
  t.row_reuse[0] = 0.8, t.row_reuse[1] = 0.2;        // 80% of rows seen once
  t.lookup_reuse[0] = 0.5, t.lookup_reuse[1] = 0.5;  // half the lookups
  EXPECT_DOUBLE_EQ(estimate_distinct_rows(t, 1000), 1000 * 0.5 / 0.8);
  EXPECT_DOUBLE_EQ(estimate_distinct_rows(testing::uniform_table(100, 4, 1), 1000), 100);  // capped
}

TEST(AnalyticModel, CommIsLatencyPlusBytesOverBandwidthPlusStragglerWait) {
  auto m = make_analytic_comm_model(hand_calibration(), 1024);
  const std::vector<double> dims = {10, 30}, delays = {0, 2};
  std::vector<double> fwd(2), bwd(2);
  m->comm_ms(dims, delays, fwd, bwd);
  // Device 0 sends 512 x 10 x 4 bytes, receives 512 x 30 x 4 = 61440 bytes;
  // device 1 the other way round: both move max = 61440 bytes at 1 GB/s.
  const double comm_ms = 0.010 + 61440 / 1e9 * 1e3;
  EXPECT_NEAR(bwd[0], comm_ms, 1e-12);
  EXPECT_NEAR(bwd[1], comm_ms, 1e-12);
  EXPECT_NEAR(fwd[0], comm_ms + 2.0, 1e-12);  // waits for device 1
  EXPECT_NEAR(fwd[1], comm_ms, 1e-12);        // the straggler waits for nobody
  std::vector<double> short_out(1), fwd_only(2), bwd_only(2);
  EXPECT_THROW(m->comm_ms(dims, delays, short_out, bwd), Error);
  // One direction alone (an empty output is not computed) is the same.
  m->comm_ms(dims, delays, fwd_only, {});
  m->comm_ms(dims, delays, {}, bwd_only);
  EXPECT_EQ(fwd_only, fwd);
  EXPECT_EQ(bwd_only, bwd);
}

TEST(Nnls, ClampsNegativeCoefficientsToZero) {
  // Unconstrained: x = (1, -1). With x >= 0: x2 = 0, x1 minimises
  // (x1 - 1)^2 + 1 + x1^2 -> 0.5.
  const std::vector<double> a = {1, 0, 0, 1, 1, 1}, b = {1, -1, 0};
  const auto x = nnls(a, b, 2);
  EXPECT_NEAR(x[0], 0.5, 1e-12);
  EXPECT_EQ(x[1], 0.0);
  const auto exact = nnls(a, std::vector<double>{2, 3, 5}, 2);
  EXPECT_NEAR(exact[0], 2, 1e-9);
  EXPECT_NEAR(exact[1], 3, 1e-9);
}

TEST(CalibrationFile, RoundTrips) {
  ScratchDir dir("calib_roundtrip");
  Calibration c = hand_calibration();
  c.executor = "cpu (1 thread, thread CPU time)";
  save_calibration(c, dir.file("a.json"));
  const Calibration back = load_calibration(dir.file("a.json"));
  EXPECT_EQ(calibration_to_json(back), calibration_to_json(c));
  EXPECT_EQ(back.executor, c.executor);
  // Files from before the field were timed on the wall clock.
  json old = calibration_to_json(c);
  old.erase("executor");
  old["threads"] = 2;
  EXPECT_EQ(calibration_from_json(old, "old.json").executor, "cpu (2 threads)");
  old["executor"] = 3;
  EXPECT_NE(testing::error_of([&] { calibration_from_json(old, "old.json"); })
                .find("old.json: field 'executor'"),
            std::string::npos);
  // Files from before the conversions: none.
  old = calibration_to_json(c);
  old.erase("fwd_convert_ns_per_element");
  old.erase("fwd_convert_ns_per_lookup");
  const Calibration before = calibration_from_json(old, "old.json");
  EXPECT_EQ(before.fwd_convert_ns, (std::array<double, 4>{}));
  EXPECT_EQ(before.fwd_convert_lookup_ns, (std::array<double, 4>{}));
}

// The forward of a table stored as fp16, bf16, int8 or int4: its bytes as
// stored, plus its conversion per element and per row looked up; fp32 and
// the backward's gradients are as before.
TEST(AnalyticModel, StoredTypesReadTheirBytesAndPayTheirConversion) {
  const Calibration c = hand_calibration();
  AnalyticTable t = analytic_table(testing::uniform_table(50'000, 64, 8), c.batch_size);
  const AnalyticTerms fp32 = analytic_terms(std::span(&t, 1), c.batch_size, c.cache_bytes);
  for (int k = 0; k < kConvertedTypes; ++k) {
    t.data_type = static_cast<DataType>(k + 1);
    AnalyticTerms typed = analytic_terms(std::span(&t, 1), c.batch_size, c.cache_bytes);
    const double ratio =
        static_cast<double>(data_type_row_bytes(t.data_type, t.dim)) / (4.0 * t.dim);
    EXPECT_NEAR(typed.fwd[3] + typed.fwd[4], (fp32.fwd[3] + fp32.fwd[4]) * ratio, 1e-6);
    EXPECT_EQ(typed.bwd[4], fp32.bwd[4]);  // fp32 gradients
    EXPECT_EQ(typed.output_bytes, fp32.output_bytes);
    EXPECT_DOUBLE_EQ(typed.converted_elements[k], t.lookups * t.dim);
    EXPECT_DOUBLE_EQ(typed.converted_lookups[k], t.lookups);
    const double convert_ms =
        (t.lookups * t.dim * c.fwd_convert_ns[k] + t.lookups * c.fwd_convert_lookup_ns[k]) * 1e-6;
    std::fill(std::begin(typed.converted_elements), std::end(typed.converted_elements), 0.0);
    std::fill(std::begin(typed.converted_lookups), std::end(typed.converted_lookups), 0.0);
    const double bytes_only = analytic_fwd_ms(typed, c);
    typed = analytic_terms(std::span(&t, 1), c.batch_size, c.cache_bytes);
    EXPECT_NEAR(analytic_fwd_ms(typed, c), bytes_only + convert_ms, 1e-9);
  }
}

// Writes hand_calibration with `edit` applied and expects Error naming the
// file and `field`.
void expect_refused(const std::function<void(json&)>& edit, const std::string& field) {
  ScratchDir dir("calib_bad");
  json j = calibration_to_json(hand_calibration());
  edit(j);
  const std::string path = dir.file("bad.json");
  write_file_atomic(path, j.dump());
  try {
    load_calibration(path);
    FAIL() << "accepted a file with a bad '" << field << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
  }
}

TEST(CalibrationFile, RefusesBadFilesNamingFileAndField) {
  expect_refused([](json& j) { j.erase("dram_gather_gbps"); }, "dram_gather_gbps");
  expect_refused([](json& j) { j["seq_gbps"] = std::nan(""); }, "seq_gbps");  // -> null
  expect_refused([](json& j) { j["cache_gather_gbps"] = 0.0; }, "cache_gather_gbps");
  expect_refused([](json& j) { j["fwd_per_lookup_ns"] = -1.0; }, "fwd_per_lookup_ns");
  expect_refused([](json& j) { j["fwd_call_us"] = "5"; }, "fwd_call_us");
  expect_refused([](json& j) { j["version"] = kCalibrationVersion + 1; }, "version");
  expect_refused([](json& j) { j["format"] = "something else"; }, "format");
  expect_refused([](json& j) { j.erase("batch_size"); }, "batch_size");
  expect_refused([](json& j) { j["fwd_convert_ns_per_lookup"]["int4"] = -1.0; }, "int4");
  expect_refused([](json& j) { j["fwd_convert_ns_per_element"] = 2.0; },
                 "fwd_convert_ns_per_element");
  ScratchDir dir("calib_torn");
  write_file_atomic(dir.file("torn.json"), "{\"format\": \"embshard-analytic");
  EXPECT_THROW(load_calibration(dir.file("torn.json")), Error);
}

TEST(Calibrate, QuickRunFitsRealProbesWithinSeconds) {
  CalibrateOptions o;
  o.quick = true;
  o.batch_size = 1024;
  const Calibration c = run_calibration(o, silent_reporter());
  EXPECT_EQ(c.executor, "cpu (1 thread)");
  // Every coefficient passes the file's own checks.
  ScratchDir dir("calib_quick");
  save_calibration(c, dir.file("c.json"));
  EXPECT_NO_THROW(load_calibration(dir.file("c.json")));
  EXPECT_GT(c.seq_gbps, 0.1);
  EXPECT_LT(c.fwd_fit_rms_pct, 50.0);
  EXPECT_LT(c.bwd_fit_rms_pct, 50.0);
  // Measured, not assumed: a shard over a big table read at random costs more
  // than the same lookups over a small hot table.
  auto m = make_analytic_compute_model(c, 0);
  EXPECT_GT(single_ms(*m, testing::uniform_table(1 << 22, 128, 32)),
            single_ms(*m, testing::uniform_table(1000, 128, 32)));
  // The typed forward probes ran and fitted each type's conversion.
  for (size_t k = 0; k < c.fwd_convert_ns.size(); ++k) {
    EXPECT_TRUE(std::isfinite(c.fwd_convert_ns[k]) && c.fwd_convert_ns[k] >= 0) << k;
    EXPECT_TRUE(std::isfinite(c.fwd_convert_lookup_ns[k]) && c.fwd_convert_lookup_ns[k] >= 0);
  }
  // int4 rows unpack two codes a byte and an fp16 scale and bias: never free.
  EXPECT_GT(c.fwd_convert_ns[3] + c.fwd_convert_lookup_ns[3], 0);
}

// --from FILE --data-types refits the conversions alone; without --from it is refused.
TEST(Calibrate, CliRefitsTheConversionsOfACalibration) {
  ScratchDir dir("calib_types");
  Calibration c = hand_calibration();
  c.executor = "cpu (1 thread)";
  c.batch_size = 512;
  c.fwd_convert_ns = {};
  c.fwd_convert_lookup_ns = {};
  save_calibration(c, dir.file("in.json"));
  const auto r = testing::run_cli("calibrate --quick --batch 512 --from " + dir.file("in.json") +
                                  " --data-types --out " + dir.file("out.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("int4 forward conversion"), std::string::npos) << r.output;
  const Calibration back = load_calibration(dir.file("out.json"));
  EXPECT_EQ(back.fwd_call_us, c.fwd_call_us);
  EXPECT_EQ(back.dram_gather_gbps, c.dram_gather_gbps);
  const std::string fp16 = fmt::format("fp16 forward conversion {:.3f} ns an element, {:.3f} ns",
                                       back.fwd_convert_ns[0], back.fwd_convert_lookup_ns[0]);
  EXPECT_NE(r.output.find(fp16), std::string::npos) << r.output;
  const auto bad = testing::run_cli("calibrate --quick --data-types --out " + dir.file("x.json"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--data-types refits a calibration given with --from"),
            std::string::npos)
      << bad.output;
}

TEST(Calibrate, CliWritesALoadableFile) {
  ScratchDir dir("calib_cli");
  const auto r = testing::run_cli("calibrate --quick --batch 512 --thread-cpu-time --out " +
                                  dir.file("models/analytic.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("calibrate: probe"), std::string::npos) << r.output;
  const Calibration c = load_calibration(dir.file("models/analytic.json"));
  EXPECT_EQ(c.batch_size, 512);
  EXPECT_EQ(c.comm_source, "default");
  EXPECT_EQ(c.executor, "cpu (1 thread, thread CPU time)");
  EXPECT_NE(make_analytic_cost_model(c, 512).source.hardware.find("thread CPU time"),
            std::string::npos);
}

TEST(Calibrate, CliAnUnwritableCheckCsvFailsBeforeAnythingIsWritten) {
  ScratchDir dir("calib_csv");
  testing::spit(dir.file("check.jsonl"), "");  // never read: the csv path fails first
  const auto r = testing::run_cli("calibrate --quick --out " + dir.file("c.json") +
                                  " --check " + dir.file("check.jsonl") + " --check-csv " +
                                  dir.file("missing/x.csv"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--check-csv"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.json")));
  // No default output: a calibration never lands on the shipped one unasked.
  const auto no_out = testing::run_cli("calibrate --quick");
  EXPECT_NE(no_out.exit_code, 0);
  EXPECT_NE(no_out.output.find("give --out FILE"), std::string::npos) << no_out.output;
}

}  // namespace
}  // namespace embshard

namespace embshard {
namespace {

// The floor under every device's all-to-all: no spread of a total beats it,
// and the even spread reaches it.
TEST(AnalyticComm, FloorHoldsForEverySpreadAndIsReachedWhenEven) {
  const Calibration c = hand_calibration();
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  for (int n : {1, 2, 3, 8, 64}) {
    std::vector<double> dims(n), delays(n), fwd(n), bwd(n);
    for (int trial = 0; trial < 50; ++trial) {
      double total = 0;
      for (int d = 0; d < n; ++d) dims[d] = std::floor(600 * u(rng) * u(rng)), total += dims[d];
      for (int d = 0; d < n; ++d) delays[d] = 3 * u(rng);
      analytic_comm_ms(c, 4096, dims, delays, fwd, bwd);
      const double floor = analytic_comm_floor_ms(c, 4096, total, n);
      for (int d = 0; d < n; ++d) ASSERT_GE(fwd[d] + bwd[d], floor * (1 - 1e-12)) << n << " " << d;
    }
    dims.assign(n, 96);
    delays.assign(n, 0);
    analytic_comm_ms(c, 4096, dims, delays, fwd, bwd);
    EXPECT_NEAR(fwd[0] + bwd[0], analytic_comm_floor_ms(c, 4096, 96.0 * n, n), 1e-12) << n;
  }
}

// A `bench comm` file made from a known alpha / beta: the fit recovers them.
TEST(CalibrateComm, FitsLatencyAndBandwidthFromACommFile) {
  ScratchDir dir("calib_comm");
  Calibration truth = hand_calibration();
  truth.comm_latency_us = 40, truth.comm_gbps = 2.5;
  std::string text = json{{"format", "embshard-comm-costs"}, {"version", 1},
                          {"num_devices", 4}, {"batch", 4096}}.dump() + "\n";
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> dim(4, 600);
  std::uniform_real_distribution<double> delay(0, 5);
  for (int s = 0; s < 20; ++s) {
    std::vector<double> dims(4), delays(4), fwd(4), bwd(4);
    for (int d = 0; d < 4; ++d) dims[d] = dim(rng), delays[d] = delay(rng);
    analytic_comm_ms(truth, 4096, dims, delays, fwd, bwd);
    text += json{{"sample", s}, {"dim_sums", dims}, {"delays_ms", delays}, {"fwd_ms", fwd},
                 {"bwd_ms", bwd}}.dump() + "\n";
  }
  write_file_atomic(dir.file("comm.jsonl"), text);
  Calibration c = hand_calibration();
  fit_comm_from_file(dir.file("comm.jsonl"), c, silent_reporter());
  EXPECT_NEAR(c.comm_latency_us, 40, 1e-6);
  EXPECT_NEAR(c.comm_gbps, 2.5, 1e-9);
  EXPECT_EQ(c.comm_source, dir.file("comm.jsonl"));
  write_file_atomic(dir.file("bad.jsonl"), json{{"format", "other"}}.dump() + "\n");
  EXPECT_THROW(fit_comm_from_file(dir.file("bad.jsonl"), c, silent_reporter()), Error);
}

// `bench comm --collectives` files made from known constants (`truth` at 2
// ranks, `truth4` at 4), the forward's unlike the backward's.
struct CollectiveFiles {
  Calibration truth, truth4;
  std::vector<std::string> paths;  // 2 ranks, 4 ranks
};

CollectiveFiles write_collective_files(const ScratchDir& dir) {
  CollectiveFiles f;
  Calibration& truth = f.truth;
  Calibration& truth4 = f.truth4;
  std::vector<std::string>& paths = f.paths;
  truth = hand_calibration();
  truth.collective_latency_us = 25, truth.collective_gbps = 6, truth.allreduce_gbps = 1.5;
  truth.collective_fwd_latency_us = 40, truth.index_gbps = 2, truth.reduce_scatter_gbps = 4;
  truth4 = truth;
  truth4.collective_latency_us = 70, truth4.collective_gbps = 3, truth4.allreduce_gbps = 2;
  truth4.collective_fwd_latency_us = 90, truth4.index_gbps = 5, truth4.reduce_scatter_gbps = 1;
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> u(0, 1);
  for (int n : {2, 4}) {
    std::string text = json{{"format", "embshard-collective-costs"}, {"version", 2},
                            {"num_devices", n}, {"batch_size", 4096}}.dump() + "\n";
    for (int s = 0; s < 15; ++s) {
      CollectiveLoad load;
      load.reset(n);
      for (int d = 0; d < n; ++d) {
        load.rw_dim_sums[d] = std::floor(300 * u(rng));
        load.index_recv_bytes[d] = std::floor(4e6 * u(rng));
        load.index_send_bytes[d] = std::floor(4e6 * u(rng));
      }
      load.allreduce_bytes = s % 3 == 0 ? 0 : std::floor(3e7 * u(rng));
      std::vector<double> fwd(n, 0.0), bwd(n, 0.0);
      analytic_collective_ms(n == 4 ? truth4 : truth, 4096, load, fwd, bwd);
      text += json{{"sample", s}, {"rw_dim_sums", load.rw_dim_sums},
                   {"index_recv_bytes", load.index_recv_bytes},
                   {"index_send_bytes", load.index_send_bytes},
                   {"allreduce_bytes", load.allreduce_bytes}, {"fwd_ms", fwd},
                   {"bwd_ms", bwd}}.dump() + "\n";
    }
    paths.push_back(dir.file("coll_n" + std::to_string(n) + ".jsonl"));
    write_file_atomic(paths.back(), text);
  }
  return f;
}

// A calibration fitted to both files.
Calibration fitted_collectives(const CollectiveFiles& f) {
  Calibration c = hand_calibration();
  fit_collectives_from_files(f.paths, c, silent_reporter());
  return c;
}

// The fit recovers each rank count's constants.
TEST(CalibrateComm, FitsTheCollectivesFromCollectivesFiles) {
  ScratchDir dir("calib_coll");
  const CollectiveFiles f = write_collective_files(dir);
  const std::vector<std::string>& paths = f.paths;
  const Calibration& truth = f.truth;
  const Calibration& truth4 = f.truth4;
  Calibration c = hand_calibration();
  fit_collectives_from_files({paths[0]}, c, silent_reporter());  // one rank count
  EXPECT_NEAR(c.collective_latency_us, 25, 1e-6);
  EXPECT_NEAR(c.collective_gbps, 6, 1e-6);
  EXPECT_NEAR(c.allreduce_gbps, 1.5, 1e-6);
  EXPECT_NEAR(c.collective_fwd_latency_us, 40, 1e-6);
  EXPECT_NEAR(c.index_gbps, 2, 1e-6);
  EXPECT_NEAR(c.reduce_scatter_gbps, 4, 1e-6);
  fit_collectives_from_files(paths, c, silent_reporter());
  ASSERT_EQ(c.collectives_by_ranks.size(), 2u);
  for (const auto& [fitted, want] : {std::pair{c.collectives_by_ranks[0], truth},
                                     std::pair{c.collectives_by_ranks[1], truth4}}) {
    EXPECT_NEAR(fitted.latency_us, want.collective_latency_us, 1e-6) << fitted.ranks;
    EXPECT_NEAR(fitted.gbps, want.collective_gbps, 1e-6) << fitted.ranks;
    EXPECT_NEAR(fitted.allreduce_gbps, want.allreduce_gbps, 1e-6) << fitted.ranks;
    EXPECT_NEAR(fitted.fwd_latency_us, want.collective_fwd_latency_us, 1e-6) << fitted.ranks;
    EXPECT_NEAR(fitted.index_gbps, want.index_gbps, 1e-6) << fitted.ranks;
    EXPECT_NEAR(fitted.reduce_scatter_gbps, want.reduce_scatter_gbps, 1e-6) << fitted.ranks;
  }
}

// Each rank count predicted with its own constants (at its batch); another
// rank count or batch with the pooled ones; they survive a round trip.
TEST(CalibrateComm, EachRankCountPredictsWithItsOwnCollectives) {
  ScratchDir dir("calib_coll_ranks");
  const CollectiveFiles f = write_collective_files(dir);
  const Calibration& truth4 = f.truth4;
  const Calibration c = fitted_collectives(f);
  CollectiveLoad load;
  load.reset(4);
  load.rw_dim_sums = {64, 0, 32, 0};
  load.allreduce_bytes = 1e6;
  std::vector<double> got(4, 0.0), want(4, 0.0), got_b(4, 0.0), want_b(4, 0.0);
  analytic_collective_ms(c, 4096, load, got, got_b);
  analytic_collective_ms(truth4, 4096, load, want, want_b);
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(got[d] + got_b[d], want[d] + want_b[d], 1e-9) << d;
  Calibration pooled_only = c;
  pooled_only.collectives_by_ranks.clear();
  load.reset(3);
  load.allreduce_bytes = 1e6;
  std::vector<double> three(3, 0.0), three_b(3, 0.0), pooled(3, 0.0), pooled_b(3, 0.0);
  analytic_collective_ms(c, 4096, load, three, three_b);
  analytic_collective_ms(pooled_only, 4096, load, pooled, pooled_b);
  EXPECT_EQ(three_b, pooled_b);
  load.reset(4);
  load.allreduce_bytes = 1e6;
  got.assign(4, 0.0), got_b.assign(4, 0.0), want.assign(4, 0.0), want_b.assign(4, 0.0);
  analytic_collective_ms(c, 2048, load, got, got_b);
  analytic_collective_ms(pooled_only, 2048, load, want, want_b);
  EXPECT_EQ(got_b, want_b);
  const Calibration back = calibration_from_json(calibration_to_json(c), "round trip");
  EXPECT_EQ(back.allreduce_gbps, c.allreduce_gbps);
  EXPECT_EQ(back.collective_source, c.collective_source);
  ASSERT_EQ(back.collectives_by_ranks.size(), 2u);
  EXPECT_EQ(back.collectives_by_ranks[1].ranks, 4);
  EXPECT_EQ(back.collectives_by_ranks[1].batch_size, 4096);
  EXPECT_EQ(back.collectives_by_ranks[1].gbps, c.collectives_by_ranks[1].gbps);
  EXPECT_EQ(back.collectives_by_ranks[1].index_gbps, c.collectives_by_ranks[1].index_gbps);
  EXPECT_EQ(back.reduce_scatter_gbps, c.reduce_scatter_gbps);
}

// A calibration from before: one without the forward's constants reads the
// forward as the backward; one without collectives reads them as 0; the
// per-rank entries are checked.
TEST(CalibrateComm, CalibrationsFromBeforeReadTheirCollectives) {
  ScratchDir dir("calib_coll_old");
  const Calibration c = fitted_collectives(write_collective_files(dir));
  CollectiveLoad load;
  std::vector<double> got(4, 0.0), got_b(4, 0.0);
  // A file from before the forward had its own constants: a reduce-scatter
  // costs what the all-gather back does.
  json backward_only = calibration_to_json(c);
  backward_only.erase("collectives_by_ranks");
  for (const char* f : {"collective_fwd_latency_us", "index_gbps", "reduce_scatter_gbps"}) {
    backward_only.erase(f);
  }
  const Calibration before = calibration_from_json(backward_only, "before");
  EXPECT_EQ(before.index_gbps, 0.0);
  load.reset(4);
  load.rw_dim_sums = {64, 0, 32, 0};
  got.assign(4, 0.0), got_b.assign(4, 0.0);
  analytic_collective_ms(before, 4096, load, got, got_b);
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(got[d], got_b[d], 1e-12) << d;
  json unordered = calibration_to_json(c);
  std::swap(unordered["collectives_by_ranks"][0], unordered["collectives_by_ranks"][1]);
  EXPECT_NE(testing::error_of([&] { calibration_from_json(unordered, "f.json"); })
                .find("f.json: collectives_by_ranks[1]: ranks 2 and batch_size 4096: entries "
                      "must be in ascending (ranks, batch_size) order, each once"),
            std::string::npos);
  unordered["collectives_by_ranks"][0].erase("collective_gbps");
  EXPECT_NE(testing::error_of([&] { calibration_from_json(unordered, "f.json"); })
                .find("f.json: collectives_by_ranks[0]: field 'collective_gbps' is missing"),
            std::string::npos);
  json old = calibration_to_json(hand_calibration());
  for (const char* f : {"collective_latency_us", "collective_gbps", "allreduce_gbps",
                        "collective_source"}) {
    old.erase(f);
  }
  EXPECT_EQ(calibration_from_json(old, "old").collective_gbps, 0.0);
}

// A record with a broken field, or an all-to-all file: errors naming them.
TEST(CalibrateComm, BadCollectivesFilesAreNamed) {
  ScratchDir dir("calib_coll_bad");
  const CollectiveFiles f = write_collective_files(dir);
  const std::vector<std::string>& paths = f.paths;
  Calibration c = hand_calibration();
  // A record with a broken field: an error naming the file, line and field.
  std::string text = testing::slurp(paths[0]);
  const size_t at = text.find("\"fwd_ms\":[");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "\"fwd_ms\":[\"x\",");
  write_file_atomic(dir.file("broken.jsonl"), text);
  try {
    fit_collectives_from_files({dir.file("broken.jsonl")}, c, silent_reporter());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("broken.jsonl: line 2: field '/fwd_ms' is [\"x\","), std::string::npos)
        << what;
  }
  // An all-to-all file is not a collectives file: the message says which is wanted.
  write_file_atomic(dir.file("a2a.jsonl"), json{{"format", "embshard-comm-costs"}}.dump() + "\n");
  try {
    fit_collectives_from_files({dir.file("a2a.jsonl")}, c, silent_reporter());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bench comm --collectives"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace embshard
