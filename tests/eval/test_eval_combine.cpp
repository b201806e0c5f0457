// Several eval record files read as one report (eval/combine.h, `embshard
// eval-report`), on files written by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/eval/combine.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;
using testing::spit;

json header(int devices = 4, const std::string& comm = "measured: MPI all-to-all over 4 ranks",
            const std::string& crc = "00000001") {
  return {{"format", "embshard-eval"}, {"algos", {"greedy", "neuroshard", "torchrec"}},
          {"devices", devices},        {"comm", comm},
          {"cost_model", "neural"},    {"pool", "/pools/p"},
          {"tasks_crc32", crc}};
}

// One task: each algorithm's measured cost (predicted alike, bound half).
json task(int index, double greedy, double ours, double torchrec) {
  const auto algo = [](double ms) {
    return json{{"measured_ms", ms}, {"predicted_ms", ms}, {"bound_ms", ms / 2}};
  };
  return {{"task", index},
          {"algos", {{"greedy", algo(greedy)}, {"neuroshard", algo(ours)},
                     {"torchrec", algo(torchrec)}}}};
}

std::string write(const ScratchDir& dir, const std::string& name, const json& head,
                  const std::vector<json>& records) {
  std::string text = head.dump() + "\n";
  for (const json& r : records) text += r.dump() + "\n";
  spit(dir.file(name), text);
  return dir.file(name);
}

// Three sets. a: torchrec best (20 + 10), ours 0.8x; b: greedy best (40 + 40
// against torchrec's 100), ours 0.9x of it; c: ours 0.7x torchrec.
struct ThreeSets {
  std::string a, b, c;
};

ThreeSets write_three_sets(const ScratchDir& dir) {
  const std::string a = write(dir, "a.jsonl", header(),
                              {task(0, 30, 16, 20), task(1, 15, 8, 10),
                               {{"task", 2}, {"infeasible", "too big"}}});
  const std::string b = write(dir, "b.jsonl", header(4, "measured: MPI", "00000002"),
                              {task(0, 40, 36, 50), task(1, 40, 36, 50)});
  const std::string c = write(dir, "c.jsonl", header(4, "measured: MPI", "00000003"),
                              {task(0, 20, 7, 10)});
  return {a, b, c};
}

// Each set against its own best baseline, the mean of their ratios with a t
// interval over the sets, and the pool against the pooled best baseline.
TEST(EvalCombine, TakesTheMeanOfTheSetsRatiosAndPoolsTheirTasks) {
  const ScratchDir dir("eval_combine");
  const ThreeSets sets = write_three_sets(dir);
  const std::string &a = sets.a, &b = sets.b, &c = sets.c;
  const CombinedEval combined = combine_eval({a, b, c}, {});
  ASSERT_EQ(combined.algos, (std::vector<std::string>{"greedy", "neuroshard", "torchrec"}));
  ASSERT_EQ(combined.per_set.size(), 3u);
  EXPECT_EQ(combined.per_set[0].tasks, 2);
  EXPECT_EQ(combined.algos[combined.per_set[0].best_baseline], "torchrec");
  EXPECT_EQ(combined.algos[combined.per_set[1].best_baseline], "greedy");
  EXPECT_EQ(combined.set_reference, (std::vector<int>{2, 0, 2}));
  EXPECT_DOUBLE_EQ(combined.set_ratio[0][1], 0.8);
  EXPECT_DOUBLE_EQ(combined.set_ratio[1][1], 0.9);
  EXPECT_DOUBLE_EQ(combined.set_ratio[2][1], 0.7);
  EXPECT_DOUBLE_EQ(combined.set_ratio[1][2], 1.25);  // torchrec x greedy
  // Pooled over 5 tasks: greedy 145, torchrec 140 (best), ours 103.
  EXPECT_EQ(combined.pooled.tasks, 5);
  EXPECT_EQ(combined.algos[combined.pooled.best_baseline], "torchrec");
  EXPECT_DOUBLE_EQ(combined.pooled_ratio[1], 103.0 / 140.0);
  EXPECT_DOUBLE_EQ(combined.pooled.algos[1].ratio_to_best_baseline, 103.0 / 140.0);
  // The mean of the sets' ratios (0.8, 0.9, 0.7: sd 0.1) +- t(2 df) 4.303
  // x 0.1 / sqrt(3).
  const MeanInterval& m = combined.set_mean[1];
  EXPECT_DOUBLE_EQ(m.mean, 0.8);
  EXPECT_NEAR(m.high - m.mean, 4.302653 * 0.1 / std::sqrt(3.0), 1e-6);
  EXPECT_EQ(combined.sets_counted, 3);
  EXPECT_TRUE(combined.notes.empty());

  const std::string report = combined_eval_report(combined);
  EXPECT_NE(report.find("3 sets (5 tasks, 4 devices)"), std::string::npos) << report;
  EXPECT_NE(report.find("95% CI over 3 sets"), std::string::npos) << report;
  EXPECT_NE(report.find(fmt::format("{:.3f}-{:.3f}", m.low, m.high)), std::string::npos)
      << report;
  EXPECT_NE(report.find("pooled:\n5 tasks; measured"), std::string::npos) << report;
  const json j = combined_eval_json(combined);
  EXPECT_TRUE(j["against"].is_null());
  EXPECT_EQ(j["sets_counted"], 3);
  EXPECT_EQ(j["sets"].size(), 3u);
  EXPECT_EQ(j["sets"][1]["reference"], "greedy");
  EXPECT_DOUBLE_EQ(j["sets"][2]["ratios"]["neuroshard"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(j["mean_of_sets"]["neuroshard"]["ratio"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["mean_of_sets"]["neuroshard"]["ci95"][0].get<double>(), m.low);
  EXPECT_EQ(j["pooled"]["reference"], "torchrec");
  EXPECT_DOUBLE_EQ(j["pooled"]["algorithms"]["neuroshard"]["ratio"].get<double>(), 103.0 / 140.0);
  const std::string svg = combined_eval_svg(combined);
  EXPECT_NE(svg.find("<title>" + c + ": 0.700</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(fmt::format("x0.800 [{:.3f}-{:.3f}]", m.low, m.high)), std::string::npos)
      << svg;
}

// Any range gets about ten ticks, however wide (the axis once stepped by at
// most 5, one tick per step).
TEST(EvalCombine, TheChartsAxisHasAboutTenTicks) {
  const ScratchDir dir("eval_combine_axis");
  const std::string a = write_three_sets(dir).a;
  const std::string wide = write(dir, "wide.jsonl", header(), {task(0, 30, 1e8, 20)});
  const std::string wide_svg = combined_eval_svg(combine_eval({a, wide}, {}));
  size_t ticks = 0;
  for (size_t at = wide_svg.find("stroke-dasharray"); at != std::string::npos;
       at = wide_svg.find("stroke-dasharray", at + 1)) {
    ++ticks;
  }
  EXPECT_GE(ticks, 4u);
  EXPECT_LE(ticks, 12u);
}

// Against one algorithm (here greedy, in every set): a: 24/45, b: 72/80,
// c: 7/20; pooled 103/145. Without a baseline, one must be named.
TEST(EvalCombine, DividesByANamedAlgorithm) {
  const ScratchDir dir("eval_combine_against");
  const ThreeSets sets = write_three_sets(dir);
  const std::string &a = sets.a, &b = sets.b, &c = sets.c;
  const CombinedEval greedy = combine_eval({a, b, c}, {}, "greedy");
  EXPECT_EQ(greedy.set_reference, (std::vector<int>{0, 0, 0}));
  EXPECT_DOUBLE_EQ(greedy.set_ratio[0][1], 24.0 / 45.0);
  EXPECT_DOUBLE_EQ(greedy.set_ratio[2][2], 0.5);
  EXPECT_DOUBLE_EQ(greedy.pooled_ratio[1], 103.0 / 145.0);
  EXPECT_DOUBLE_EQ(greedy.pooled_ratio[0], 1.0);
  EXPECT_DOUBLE_EQ(greedy.set_mean[1].mean, (24.0 / 45 + 0.9 + 0.35) / 3);
  EXPECT_NE(combined_eval_report(greedy).find("each set's mean cost x its greedy's"),
            std::string::npos);
  EXPECT_EQ(combined_eval_json(greedy)["against"], "greedy");
  EXPECT_NE(error_of([&] { combine_eval({a}, {"neuroshard", "torchrec"}, "greedy"); })
                .find("--against greedy: not among the algorithms compared (neuroshard,torchrec)"),
            std::string::npos);
  // No baseline among them and nothing named to divide by.
  EXPECT_NE(error_of([&] { combine_eval({a}, {"neuroshard"}); })
                .find("no baseline among the algorithms compared (neuroshard): name one to "
                      "divide by with --against ALGO"),
            std::string::npos);
  EXPECT_NE(error_of([&] { combine_eval({a}, {"neuroshard", "torchrec", "neuroshard"}); })
                .find("eval-report: --algos names 'neuroshard' twice"),
            std::string::npos);
}

// One set alone: no interval over sets (it takes two).
TEST(EvalCombine, OneSetHasNoIntervalOverSets) {
  const ScratchDir dir("eval_combine_one");
  const std::string a = write_three_sets(dir).a;
  const CombinedEval one = combine_eval({a}, {"neuroshard", "torchrec"});
  EXPECT_EQ(one.algos, (std::vector<std::string>{"neuroshard", "torchrec"}));
  EXPECT_DOUBLE_EQ(one.set_mean[0].mean, 0.8);
  EXPECT_NE(combined_eval_report(one).find("95% CI over 1 set "), std::string::npos)
      << combined_eval_report(one);
  EXPECT_TRUE(combined_eval_json(one)["mean_of_sets"]["neuroshard"]["ci95"].is_null());
}

TEST(EvalCombine, ComparesTheAlgorithmsOfEveryFile) {
  const ScratchDir dir("eval_combine_algos");
  json fewer = header(4, "measured: MPI", "00000002");
  fewer["algos"] = {"neuroshard", "torchrec"};
  json record = task(0, 30, 16, 20);
  record["algos"].erase("greedy");
  const std::string a = write(dir, "a.jsonl", header(), {task(0, 30, 16, 20)});
  const std::string b = write(dir, "b.jsonl", fewer, {record});
  EXPECT_EQ(combine_eval({a, b}, {}).algos,
            (std::vector<std::string>{"neuroshard", "torchrec"}));
  EXPECT_NE(error_of([&] { combine_eval({a, b}, {"greedy", "neuroshard"}); })
                .find(b + ": no algorithm 'greedy' (it has neuroshard,torchrec)"),
            std::string::npos);
  json none = header(4, "measured: MPI", "00000003");
  none["algos"] = {"random"};
  const std::string c = write(dir, "c.jsonl", none, {});
  EXPECT_NE(error_of([&] { combine_eval({a, b, c}, {}); })
                .find(c + ": none of the algorithms of the files before it (neuroshard,torchrec) "
                          "is in it (it has random)"),
            std::string::npos);
}

// What cannot stand side by side is an error naming the file and field.
TEST(EvalCombine, RefusesFilesThatDoNotCompare) {
  const ScratchDir dir("eval_combine_bad");
  const std::string a = write(dir, "a.jsonl", header(), {task(0, 30, 16, 20)});
  const std::string eight = write(dir, "eight.jsonl", header(8), {task(0, 30, 16, 20)});
  EXPECT_NE(error_of([&] { combine_eval({a, eight}, {}); })
                .find(eight + ": field '/devices' is 8, but " + a + " has 4"),
            std::string::npos);
  json typed = header();
  typed["sharding_types"] = "table_wise,column_wise";
  const std::string tc = write(dir, "tc.jsonl", typed, {task(0, 30, 16, 20)});
  EXPECT_NE(error_of([&] { combine_eval({a, tc}, {}); })
                .find(tc + ": field '/sharding_types' is \"table_wise,column_wise\", but " + a +
                      " has absent"),
            std::string::npos);
  json odd = header();
  odd["predict_only"] = "yes";
  const std::string o = write(dir, "o.jsonl", odd, {});
  EXPECT_NE(error_of([&] { combine_eval({o}, {}); })
                .find(o + ": field '/predict_only' is \"yes\", expected true or false"),
            std::string::npos);
  const std::string modelled =
      write(dir, "modelled.jsonl", header(4, "cost model (one process)"), {});
  EXPECT_NE(error_of([&] { combine_eval({a, modelled}, {}); })
                .find("measured and modelled communication do not combine"),
            std::string::npos);
  json predicted = header();
  predicted["predict_only"] = true;
  const std::string p = write(dir, "p.jsonl", predicted, {});
  EXPECT_NE(error_of([&] { combine_eval({a, p}, {}); })
                .find(p + ": predicted only, but " + a + " is measured"),
            std::string::npos);
  EXPECT_NE(error_of([&] { combine_eval({a, dir.file("./a.jsonl")}, {}); }).find("given twice"),
            std::string::npos);
  const std::string compute = write(dir, "compute.jsonl", {{"format", "embshard-compute"}}, {});
  EXPECT_NE(error_of([&] { combine_eval({compute}, {}); })
                .find(compute + ": not an eval record file (its header's format is "
                                "\"embshard-compute\""),
            std::string::npos);
  json no_devices = header();
  no_devices.erase("devices");
  const std::string d = write(dir, "d.jsonl", no_devices, {});
  EXPECT_NE(error_of([&] { combine_eval({d}, {}); }).find("field '/devices' is missing"),
            std::string::npos);
  spit(dir.file("empty.jsonl"), "");
  EXPECT_NE(error_of([&] { combine_eval({dir.file("empty.jsonl")}, {}); }).find("no header"),
            std::string::npos);
  EXPECT_NE(error_of([&] { combine_eval({dir.file("missing.jsonl")}, {}); }).find("missing.jsonl"),
            std::string::npos);
}

// A record without a field the summary reads, or with a cost no machine
// measures (it would overflow the ratios and the chart), names the file and
// record.
TEST(EvalCombine, RefusesRecordsWithoutAUsableCost) {
  const ScratchDir dir("eval_combine_records");
  json torn = task(0, 30, 16, 20);
  torn["algos"]["torchrec"].erase("measured_ms");
  const std::string t = write(dir, "t.jsonl", header(), {torn});
  EXPECT_NE(error_of([&] { combine_eval({t}, {}); }).find(t + ": eval record 1 (task 0)"),
            std::string::npos);
  const std::string z = write(dir, "z.jsonl", header(), {task(0, 30, 0, 20)});
  EXPECT_NE(error_of([&] { combine_eval({z}, {}); })
                .find(z + ": eval record 1 (task 0): measured_ms of 'neuroshard' is 0, a cost "
                          "must be positive"),
            std::string::npos);

  for (const double absurd : {1e308, 1e-300}) {
    const std::string h = write(dir, "h.jsonl", header(), {task(0, 30, absurd, 20)});
    EXPECT_NE(error_of([&] { combine_eval({h}, {}); })
                  .find(h + ": eval record 1 (task 0): measured_ms of 'neuroshard' is " +
                        fmt::format("{}", absurd) + ": outside 1e-6 to 1e9 ms a step"),
              std::string::npos)
        << absurd;
  }
}

// The same tasks twice (a rerun), a set with no task every algorithm
// planned, other passes: notes, not errors.
TEST(EvalCombine, NotesWhatCombinesButMayMislead) {
  const ScratchDir dir("eval_combine_notes");
  const std::string a = write(dir, "a.jsonl", header(), {task(0, 30, 16, 20)});
  const std::string rerun = write(dir, "rerun.jsonl", header(), {task(0, 31, 17, 21)});
  const std::string failed = write(dir, "failed.jsonl", header(4, "measured: MPI", "00000009"),
                                   {{{"task", 0}, {"infeasible", "too big"}}});
  json passes = header(4, "measured: MPI", "0000000a");
  passes["compute_passes"] = 3;
  const std::string three = write(dir, "three.jsonl", passes, {task(0, 30, 16, 20)});
  const CombinedEval c = combine_eval({a, rerun, failed, three}, {});
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_NE(c.notes[0].find(a + " and " + rerun + " evaluate the same tasks"), std::string::npos);
  EXPECT_NE(c.notes[1].find(failed + ": no task that every algorithm planned"),
            std::string::npos);
  EXPECT_NE(c.notes[2].find(three + ": field '/compute_passes' is 3, " + a + " has absent"),
            std::string::npos);
  EXPECT_EQ(c.sets_counted, 3);
  EXPECT_EQ(c.pooled.tasks, 3);
  EXPECT_NE(combined_eval_report(c).find("note: " + c.notes[1]), std::string::npos);
}

TEST(EvalCombine, Cli) {
  const ScratchDir dir("eval_combine_cli");
  const std::string a = write(dir, "a.jsonl", header(), {task(0, 30, 16, 20)});
  const std::string b =
      write(dir, "b.jsonl", header(4, "measured: MPI", "00000002"), {task(0, 40, 36, 50)});
  const std::string svg = dir.file("sets.svg");
  const auto r = run_cli("eval-report " + a + " " + b +
                         " --algos neuroshard,torchrec --against torchrec --svg " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 sets (2 tasks, 4 devices): each set's mean cost x its torchrec's"),
            std::string::npos)
      << r.output;
  EXPECT_NE(slurp(svg).find("<svg"), std::string::npos);
  // Records kept gzip'd read the same.
  ASSERT_EQ(testing::run_shell("gzip -c " + a + " > " + a + ".gz").exit_code, 0);
  const auto gz = run_cli("eval-report " + a + ".gz " + b + " --algos neuroshard,torchrec");
  ASSERT_EQ(gz.exit_code, 0) << gz.output;
  EXPECT_NE(gz.output.find("2 sets (2 tasks, 4 devices)"), std::string::npos) << gz.output;
  const auto j = run_cli("eval-report --json " + a + " " + b);
  ASSERT_EQ(j.exit_code, 0) << j.output;
  EXPECT_EQ(json::parse(j.output)["sets"].size(), 2u);
  // Bad input: exit 1 naming the file, and no chart left behind.
  std::filesystem::remove(svg);
  const std::string eight = write(dir, "eight.jsonl", header(8), {task(0, 30, 16, 20)});
  const auto bad = run_cli("eval-report " + a + " " + eight + " --svg " + svg);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find(eight + ": field '/devices' is 8"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(svg));
  // A chart never overwrites a record file it reads.
  const std::string before = slurp(a);
  const auto over = run_cli("eval-report " + a + " " + b + " --svg " + a);
  EXPECT_EQ(over.exit_code, 1) << over.output;
  EXPECT_NE(over.output.find("name the same file"), std::string::npos) << over.output;
  EXPECT_EQ(slurp(a), before);
  EXPECT_NE(run_cli("eval-report").exit_code, 0);
}

}  // namespace
}  // namespace embshard
