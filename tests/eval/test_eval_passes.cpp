// eval --compute-passes: every device's compute measured several times, each
// device counted at its median, the first measurement's figure kept beside.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/record_file.h"
#include "embshard/util/reporter.h"
#include "embshard/util/statistics.h"
#include "eval_test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::make_tasks;
using testing::ScratchDir;

TEST(EvalPasses, EachDeviceCountsAtTheMedianOfItsComputePasses) {
  ScratchDir dir("eval_passes");
  EvalOptions o;
  o.tasks_path = make_tasks(dir);
  o.algos = {"size_greedy", "neuroshard"};
  o.devices = 2;
  o.cost_model = "analytic";
  o.out_path = dir.file("eval.jsonl");
  o.measure.reference_window_s = 0.3;
  o.measure.compute_passes = 3;
  const auto records = run_eval(o, silent_reporter());
  ASSERT_EQ(records.size(), 3u);
  int moved = 0;  // devices whose passes differ: each pass measured afresh
  for (const json& r : records) {
    for (const char* a : {"size_greedy", "neuroshard"}) {
      const json& x = r["algos"][a];
      const auto passes = x["device_compute_ms"]["measured_passes"]
                              .get<std::vector<std::vector<double>>>();
      const auto measured = x["device_compute_ms"]["measured"].get<std::vector<double>>();
      ASSERT_EQ(passes.size(), 3u) << a;
      ASSERT_EQ(measured.size(), 2u) << a;
      for (size_t d = 0; d < 2; ++d) {
        ASSERT_EQ(passes[0].size(), 2u);
        const std::vector<double> of_device = {passes[0][d], passes[1][d], passes[2][d]};
        EXPECT_DOUBLE_EQ(measured[d], median(of_device)) << a << " device " << d;
        EXPECT_GT(*std::min_element(of_device.begin(), of_device.end()), 0) << a;
        moved += of_device[0] != of_device[1] || of_device[1] != of_device[2] ? 1 : 0;
      }
      // The plan's cost covers its slowest device, on the medians and on
      // the first pass alone.
      EXPECT_GE(x["measured_ms"].get<double>(),
                *std::max_element(measured.begin(), measured.end()))
          << a;
      EXPECT_GE(x["measured_first_compute_ms"].get<double>(),
                *std::max_element(passes[0].begin(), passes[0].end()))
          << a;
    }
  }
  EXPECT_GT(moved, 0);
  json header;
  RecordFile::read_all(o.out_path, &header, nullptr);
  EXPECT_EQ(header["compute_passes"], 3);

  const EvalSummary summary = summarize_eval(records, o.algos);
  EXPECT_TRUE(summary.first_compute);
  double first = 0;
  for (const json& r : records) {
    first += r["algos"]["neuroshard"]["measured_first_compute_ms"].get<double>();
  }
  EXPECT_NEAR(summary.algos[1].mean_first_compute_ms, first / 3, 1e-9);
  EXPECT_GT(summary.algos[1].first_compute_ratio_to_best_baseline, 0);
  EXPECT_NE(eval_report(summary, "model").find("x best (1st compute)"), std::string::npos);
  EXPECT_FALSE(eval_summary_json(summary, "model")["algorithms"]["neuroshard"]
                   ["mean_first_compute_ms"].is_null());

  // Another number of passes never resumes these records; the file stays.
  EvalOptions once = o;
  once.measure.compute_passes = 1;
  const std::string before = testing::slurp(o.out_path);
  EXPECT_NE(testing::error_of([&] { run_eval(once, silent_reporter()); }).find("compute_passes"),
            std::string::npos);
  EXPECT_EQ(testing::slurp(o.out_path), before);
  // A run of one pass keeps no passes and no first-pass figure.
  once.out_path = dir.file("once.jsonl");
  const auto single = run_eval(once, silent_reporter());
  ASSERT_EQ(single.size(), 3u);
  EXPECT_FALSE(single[0]["algos"]["neuroshard"].contains("measured_first_compute_ms"));
  EXPECT_FALSE(single[0]["algos"]["neuroshard"]["device_compute_ms"].contains("measured_passes"));
  EXPECT_FALSE(summarize_eval(single, o.algos).first_compute);
}

TEST(EvalPasses, ComputePassesOutOfRangeOrWithNothingMeasuredAreRefused) {
  ScratchDir dir("eval_passes_bad");
  EvalOptions o;
  o.tasks_path = make_tasks(dir);
  o.algos = {"size_greedy"};
  o.devices = 2;
  o.cost_model = "analytic";
  o.out_path = dir.file("eval.jsonl");
  for (int passes : {0, 10}) {
    o.measure.compute_passes = passes;
    EXPECT_NE(testing::error_of([&] { run_eval(o, silent_reporter()); })
                  .find(fmt::format("--compute-passes {}: need 1..9", passes)),
              std::string::npos);
  }
  o.measure.compute_passes = 2;
  o.predict_only = true;
  EXPECT_NE(testing::error_of([&] { run_eval(o, silent_reporter()); }).find("--predict-only"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.out_path));
}

}  // namespace
}  // namespace embshard
