#include <gtest/gtest.h>

#include <cmath>

#include "embshard/bench/plan_bench.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

PlanBenchOptions small_bench() {
  PlanBenchOptions o;
  o.sizes = {"30x4"};
  o.cost_models = {"analytic"};
  o.repeats = 1;
  o.planner.threads = 1;
  return o;
}

// The model calls counted are the search's: the same for the same search, more
// without the screen, and they show in the report.
TEST(PlanBench, CountsTheSearchsModelCalls) {
  PlanBenchOptions o = small_bench();
  const std::vector<PlanBenchRow> a = run_plan_bench(o, silent_reporter());
  const std::vector<PlanBenchRow> b = run_plan_bench(o, silent_reporter());
  o.planner.budget.screen_keep = 0;
  const std::vector<PlanBenchRow> unscreened = run_plan_bench(o, silent_reporter());
  ASSERT_EQ(a.size(), 1u);
  EXPECT_GT(a[0].model_calls, 0u);
  EXPECT_EQ(a[0].model_calls, b[0].model_calls);
  EXPECT_GT(unscreened[0].model_calls, a[0].model_calls);
  EXPECT_NE(plan_bench_report(a, o).find(std::to_string(a[0].model_calls)), std::string::npos);
}

// Several planners side by side: a row for each at every size, in order,
// each with its own peak memory; an unknown one is refused by name.
TEST(PlanBench, RunsSeveralPlannersSideBySide) {
  PlanBenchOptions o = small_bench();
  o.sizes = {"30x4", "40x4"};
  o.algos = {"neuroshard", "torchrec"};
  const std::vector<PlanBenchRow> rows = run_plan_bench(o, silent_reporter());
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].tables, i < 2 ? 30 : 40);
    EXPECT_EQ(rows[i].algo, o.algos[i % 2]);
    EXPECT_GT(rows[i].cost_ms, 0);
    EXPECT_GT(rows[i].peak_rss_mb, 0);
  }
  EXPECT_NE(plan_bench_report(rows, o).find("torchrec"), std::string::npos);
  o.algos = {"neuroshard", "neurosharp"};
  EXPECT_NE(testing::error_of([&] {
              run_plan_bench(o, silent_reporter());
            }).find("--algo 'neurosharp' is no planner"),
            std::string::npos);
}

// With hosts, every plan pays each host's link: a slow link costs the same
// search's plans more than a fast one (a flat task is the fast link's
// limit), the report says the hosts, and a layout with hosts but no link is
// refused by the option's name.
TEST(PlanBench, PricesHostsWhereGiven) {
  PlanBenchOptions o = small_bench();
  o.sizes = {"40x8"};
  const std::vector<PlanBenchRow> flat = run_plan_bench(o, silent_reporter());
  o.topology = {.devices_per_host = 2, .inter_host_gbps = 0.05, .inter_host_latency_us = 20};
  const std::vector<PlanBenchRow> slow = run_plan_bench(o, silent_reporter());
  ASSERT_EQ(flat.size(), 1u);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_GT(slow[0].cost_ms, flat[0].cost_ms * 1.05);
  EXPECT_NE(plan_bench_report(slow, o).find("hosts of 2 devices, 0.05 GB/s"), std::string::npos);
  EXPECT_NE(plan_bench_report(flat, small_bench()).find("one host"), std::string::npos);
  o.topology.inter_host_gbps = 0;
  EXPECT_NE(testing::error_of([&] { run_plan_bench(o, silent_reporter()); })
                .find("--inter-host-gbps"),
            std::string::npos);
}

TEST(PlanBench, RefusesAMalformedSize) {
  PlanBenchOptions o = small_bench();
  o.sizes = {"30x4", "30by4"};
  try {
    run_plan_bench(o, silent_reporter());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'30by4'"), std::string::npos) << e.what();
  }
  o.sizes = {"99999999999x4"};  // named, not wrapped into an allocation that fails
  EXPECT_NE(testing::error_of([&] { run_plan_bench(o, silent_reporter()); })
                .find("'99999999999x4': at most 1000000 tables"),
            std::string::npos);
  o.sizes = {"30x4"};
  o.cost_models = {"measured"};  // no traces to execute
  EXPECT_NE(testing::error_of([&] { run_plan_bench(o, silent_reporter()); })
                .find("--cost-models measured executes a workload's traces"),
            std::string::npos);
}

TEST(PlanBench, RefusesAMemorySlackTheTablesCannotFit) {
  for (double slack : {0.5, 0.0, -1.0, std::nan("")}) {
    PlanBenchOptions o = small_bench();
    o.mem_slack = slack;
    EXPECT_NE(testing::error_of([&] { run_plan_bench(o, silent_reporter()); }).find("--mem-slack"),
              std::string::npos)
        << slack;
  }
}

}  // namespace
}  // namespace embshard
