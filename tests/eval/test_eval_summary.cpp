// eval's summary of a records file: the raw clock, where the cost goes,
// verification's fall-back and the ratio's interval (records made by hand).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;

// The raw clock's means and ratios are over the same tasks as the measured
// ones, against the best baseline on the raw clock; a file where any record
// lacks them shows none.
TEST(Eval, SummaryReadsTheRawClock) {
  const auto record = [](int task, double greedy, double greedy_raw, double ours,
                         double ours_raw) {
    const auto algo = [](double ms, double raw_ms) {
      json a = {{"measured_ms", ms}, {"predicted_ms", ms}, {"bound_ms", ms / 2}};
      if (raw_ms > 0) a["measured_raw_ms"] = raw_ms;
      return a;
    };
    return json{{"task", task},
                {"algos", {{"greedy", algo(greedy, greedy_raw)},
                           {"neuroshard", algo(ours, ours_raw)}}}};
  };
  const std::vector<std::string> algos = {"greedy", "neuroshard"};
  std::vector<json> records = {record(0, 10, 20, 8, 18), record(1, 30, 40, 24, 42),
                               {{"task", 2}, {"infeasible", "too big"}}};
  const EvalSummary s = summarize_eval(records, algos);
  ASSERT_TRUE(s.raw_clock);
  EXPECT_DOUBLE_EQ(s.algos[0].mean_raw_ms, 30);
  EXPECT_DOUBLE_EQ(s.algos[1].mean_raw_ms, 30);
  EXPECT_DOUBLE_EQ(s.algos[1].ratio_to_best_baseline, 0.8);
  EXPECT_DOUBLE_EQ(s.algos[1].raw_ratio_to_best_baseline, 1.0);
  const json j = eval_summary_json(s, "test");
  EXPECT_DOUBLE_EQ(j["algorithms"]["neuroshard"]["mean_raw_ms"].get<double>(), 30);
  const std::string report = eval_report(s, "test");
  EXPECT_NE(report.find("x best (raw)"), std::string::npos) << report;
  EXPECT_NE(eval_svg(s, 4).find("(x0.80 [0.80-0.80]; raw x1.00)"), std::string::npos)
      << eval_svg(s, 4);
  records.push_back(record(3, 10, 0, 9, 0));  // measured without the raw clock
  const EvalSummary mixed = summarize_eval(records, algos);
  EXPECT_FALSE(mixed.raw_clock);
  EXPECT_EQ(mixed.algos[1].raw_ratio_to_best_baseline, 0);
  const json mixed_json = eval_summary_json(mixed, "test");
  EXPECT_TRUE(mixed_json["algorithms"]["neuroshard"]["mean_raw_ms"].is_null());
  EXPECT_EQ(eval_report(mixed, "test").find("raw"), std::string::npos);
  EXPECT_EQ(eval_svg(mixed, 4).find("raw"), std::string::npos);
}

// Where the cost goes: the slowest device's compute, the devices' mean and
// the rest, over the same tasks; none where a record lacks the devices.
TEST(Eval, SummarySplitsTheCostIntoComputeAndTheRest) {
  const auto algo = [](double ms, std::vector<double> devices) {
    json a = {{"measured_ms", ms}, {"predicted_ms", ms}, {"bound_ms", ms / 2}};
    if (!devices.empty()) a["device_compute_ms"] = {{"measured", devices}, {"predicted", devices}};
    return a;
  };
  const std::vector<std::string> algos = {"greedy", "neuroshard"};
  std::vector<json> records = {
      {{"task", 0}, {"algos", {{"greedy", algo(10, {8, 4})}, {"neuroshard", algo(8, {6, 6})}}}},
      {{"task", 1}, {"algos", {{"greedy", algo(20, {16, 8})}, {"neuroshard", algo(12, {9, 7})}}}}};
  const EvalSummary s = summarize_eval(records, algos);
  ASSERT_TRUE(s.device_compute);
  const AlgoSummary& greedy = s.algos[0];
  EXPECT_DOUBLE_EQ(greedy.mean_slowest_compute_ms, 12);
  EXPECT_DOUBLE_EQ(greedy.mean_device_compute_ms, 9);
  EXPECT_DOUBLE_EQ(greedy.rest_ms(), 3);
  EXPECT_DOUBLE_EQ(greedy.balanced_ms(), 12);
  EXPECT_DOUBLE_EQ(s.algos[1].balanced_ms(), 9.5);  // (6 + 8) / 2 + (10 - 7.5)
  const std::string report = eval_report(s, "test");
  EXPECT_NE(report.find("where the cost goes"), std::string::npos) << report;
  EXPECT_NE(report.find("0.633"), std::string::npos) << report;  // 9.5 / 15
  EXPECT_NE(eval_svg(s, 2).find("greedy: slowest device's compute 12.000 ms, the rest 3.000 ms"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(
      eval_summary_json(s, "test")["algorithms"]["greedy"]["mean_slowest_compute_ms"].get<double>(),
      12);
  records.push_back(
      {{"task", 2}, {"algos", {{"greedy", algo(10, {})}, {"neuroshard", algo(9, {})}}}});
  const EvalSummary mixed = summarize_eval(records, algos);
  EXPECT_FALSE(mixed.device_compute);
  EXPECT_EQ(eval_report(mixed, "test").find("where the cost goes"), std::string::npos);
  EXPECT_EQ(eval_svg(mixed, 2).find("communication and waits"), std::string::npos);
  EXPECT_TRUE(eval_summary_json(mixed, "test")["algorithms"]["greedy"]["mean_device_compute_ms"]
                  .is_null());
}

// A verified algorithm's fall-back: its measured cost against the chosen
// plan's figure in verification (the fastest half of its passes; a
// leader's, the median of that and its fresh measurements).
TEST(Eval, SummaryGivesVerificationsFallBack) {
  const auto algo = [](double ms) {
    return json{{"measured_ms", ms}, {"predicted_ms", ms}, {"bound_ms", ms / 2}};
  };
  const std::vector<std::string> algos = {"greedy", "neuroshard+verify"};
  json chosen = algo(11);  // passes 10 and 12 (the fastest half: 10): +10%
  chosen["verification"] = {{"chosen_passes_ms", {12.0, 10.0}}};
  json leader = algo(9);  // median of 10 (passes), 8 and 9 (fresh): 9, +0%
  leader["verification"] = {{"chosen_passes_ms", {10.0, 11.0}}, {"chosen_fresh_ms", {8.0, 9.0}}};
  // Choices judged against a leader's span: a tie on one of the two.
  chosen["verification"]["runner_up"] = {{"candidate", 1}, {"lead_pct", 3.0},
                                         {"span_pct", 4.0}, {"tie", true}};
  leader["verification"]["runner_up"] = {{"candidate", 2}, {"lead_pct", 5.0},
                                         {"span_pct", 4.0}, {"tie", false}};
  json older = algo(10);  // one pass, no passes kept: not counted
  older["verification"] = {{"measured_plans", 4}};
  const std::vector<json> records = {
      {{"task", 0}, {"algos", {{"greedy", algo(12)}, {"neuroshard+verify", chosen}}}},
      {{"task", 1}, {"algos", {{"greedy", algo(12)}, {"neuroshard+verify", leader}}}},
      {{"task", 2}, {"algos", {{"greedy", algo(12)}, {"neuroshard+verify", older}}}}};
  const EvalSummary s = summarize_eval(records, algos);
  EXPECT_TRUE(s.algos[0].fallback_pct.empty());
  ASSERT_EQ(s.algos[1].fallback_pct.size(), 2u);
  EXPECT_NEAR(s.algos[1].fallback_pct[0], 10, 1e-9);
  EXPECT_NEAR(s.algos[1].fallback_pct[1], 0, 1e-9);
  const std::string report = eval_report(s, "test");
  EXPECT_NE(report.find("neuroshard+verify: the chosen plan measured +5.0% (median +5.0%, over 2 "
                        "tasks) against its figure in verification; its lead over the "
                        "runner-up within a leader's own span (a tie) on 1 of 2 tasks\n"),
            std::string::npos)
      << report;
  EXPECT_EQ(s.algos[1].choices_judged, 2);
  EXPECT_EQ(s.algos[1].choice_ties, 1);
  const json j = eval_summary_json(s, "test")["algorithms"];
  EXPECT_EQ(j["neuroshard+verify"]["verification_ties"]["ties"], 1);
  EXPECT_EQ(j["neuroshard+verify"]["verification_ties"]["tasks"], 2);
  EXPECT_FALSE(j["greedy"].contains("verification_ties"));
  EXPECT_NEAR(j["neuroshard+verify"]["verification_fallback_pct"]["mean"].get<double>(), 5, 1e-9);
  EXPECT_FALSE(j["greedy"].contains("verification_fallback_pct"));
}

// The ratio to the best baseline comes with its interval over the tasks:
// inside the tasks' own ratios, around the ratio of means; none from one task.
TEST(Eval, SummaryGivesTheRatiosIntervalOverTheTasks) {
  const auto record = [](int task, double greedy, double ours) {
    const auto algo = [](double ms) {
      return json{{"measured_ms", ms}, {"predicted_ms", ms}, {"bound_ms", ms / 2}};
    };
    return json{{"task", task}, {"algos", {{"greedy", algo(greedy)}, {"neuroshard", algo(ours)}}}};
  };
  const std::vector<std::string> algos = {"greedy", "neuroshard"};
  // Per-task ratios 0.7, 0.95, 0.8, 1.1, 0.75, 0.9.
  const std::vector<json> records = {record(0, 10, 7),  record(1, 20, 19), record(2, 10, 8),
                                     record(3, 5, 5.5), record(4, 8, 6),   record(5, 12, 10.8)};
  const EvalSummary s = summarize_eval(records, algos);
  const AlgoSummary& ours = s.algos[1];
  EXPECT_GE(ours.ratio_ci_low, 0.7);
  EXPECT_LT(ours.ratio_ci_low, ours.ratio_to_best_baseline);
  EXPECT_GT(ours.ratio_ci_high, ours.ratio_to_best_baseline);
  EXPECT_LE(ours.ratio_ci_high, 1.1);
  EXPECT_DOUBLE_EQ(s.algos[0].ratio_ci_low, 1.0);  // the best baseline against itself
  EXPECT_DOUBLE_EQ(s.algos[0].ratio_ci_high, 1.0);
  const json j = eval_summary_json(s, "test")["algorithms"]["neuroshard"]["ratio_ci95"];
  ASSERT_TRUE(j.is_array()) << j.dump();
  EXPECT_DOUBLE_EQ(j[0].get<double>(), ours.ratio_ci_low);
  const std::string shown = fmt::format("{:.3f}-{:.3f}", ours.ratio_ci_low, ours.ratio_ci_high);
  EXPECT_NE(eval_report(s, "test").find(shown), std::string::npos) << eval_report(s, "test");

  // The chart leaves room for the longest name (16 + 7 px a character).
  json renamed = records[0];
  renamed["algos"]["neuroshard@table_wise+column_wise"] = renamed["algos"]["neuroshard"];
  const std::string svg = eval_svg(
      summarize_eval({renamed}, {"greedy", "neuroshard@table_wise+column_wise"}), 4);
  EXPECT_NE(svg.find("<rect x=\"247\""), std::string::npos) << svg;
  // A variant of the search (its own options) is no baseline either.
  renamed["algos"]["neuroshard:uncertainty=0.1"] = renamed["algos"]["neuroshard"];
  const EvalSummary variant = summarize_eval({renamed}, {"greedy", "neuroshard:uncertainty=0.1"});
  EXPECT_DOUBLE_EQ(variant.algos[0].ratio_to_best_baseline, 1.0);
  EXPECT_DOUBLE_EQ(variant.algos[1].ratio_to_best_baseline, 0.7);

  const EvalSummary one = summarize_eval({records[0]}, algos);
  EXPECT_EQ(one.algos[1].ratio_ci_high, 0);

  // A record edited by hand: the error names it and the field, never a read
  // past the end of the record.
  json edited = records[1];
  edited["algos"]["neuroshard"].erase("bound_ms");
  const std::string e =
      testing::error_of([&] { summarize_eval({records[0], edited}, algos, "out.jsonl"); });
  EXPECT_NE(e.find("out.jsonl: eval record 2 (task 1)"), std::string::npos) << e;
  EXPECT_NE(e.find("bound_ms"), std::string::npos) << e;
  edited.erase("algos");
  EXPECT_NE(testing::error_of([&] { summarize_eval({edited}, algos); }).find("'algos'"),
            std::string::npos);
  EXPECT_TRUE(eval_summary_json(one, "test")["algorithms"]["neuroshard"]["ratio_ci95"].is_null());
}

}  // namespace
}  // namespace embshard
