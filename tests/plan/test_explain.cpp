// Explanations, the cost model's source in reports, and the limits that stop
// absurd tasks before a search.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embshard/plan/explain.h"
#include "embshard/plan/report.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/machine.h"
#include "search/toy_cost_model.h"
#include "test_util.h"

namespace embshard {
namespace {

TableSpec table(const std::string& name, int64_t rows, int dim, double pooling) {
  TableSpec t;
  t.name = name;
  t.rows = rows;
  t.dim = dim;
  t.pooling_factor = pooling;
  t.unique_rows = std::min<int64_t>(rows, 1000);
  t.row_reuse[0] = t.lookup_reuse[0] = 1;
  return t;
}

TEST(Explain, EachDecisionAgainstItsBestAlternative) {
  // 3 devices; "big" fits no device whole, so it is split; "a" and "b" are
  // both on device 0 (a poor plan), device 2 is empty.
  const int64_t cap = MemoryModel{}.shard_bytes(DataType::kFp32, 1000, 64) +
                      MemoryModel{}.shard_bytes(DataType::kFp32, 1000, 64) +
                      MemoryModel{}.shard_bytes(DataType::kFp32, 4000, 64);
  const PlanTask task =
      make_task({table("a", 1000, 64, 20), table("b", 1000, 64, 20), table("big", 4000, 128, 5)},
                4096, {cap, cap, cap}, {});
  Plan plan;
  plan.shards = {{0, 0, 64, 0, 1000, 0, false},
                 {1, 0, 64, 0, 1000, 0, false},
                 {2, 0, 64, 0, 4000, 1, false},
                 {2, 64, 64, 0, 4000, 2, false}};
  validate_plan(task, plan);
  testing::ToyCostModel model;
  ShardCosts costs(task, model);
  const std::vector<Decision> why = explain_plan(task, plan, costs);
  ASSERT_EQ(why.size(), 3u);
  const double cost = predict_plan(task, plan, costs).cost_ms;
  EXPECT_EQ(why[0].decision, "whole on device 0");
  EXPECT_DOUBLE_EQ(why[0].cost_ms, cost);
  // The best alternative for "a" is a real plan's prediction, and cheaper:
  // device 0 carries both hot tables.
  ASSERT_FALSE(why[0].alternative.empty());
  double best = 1e300;
  for (int dev : {1, 2}) {
    Plan alt = plan;
    alt.shards[0].device = dev;
    best = std::min(best, predict_plan(task, alt, costs).cost_ms);
  }
  EXPECT_DOUBLE_EQ(why[0].alternative_ms, best);
  EXPECT_LT(why[0].saving(), 0.0);
  EXPECT_EQ(why[2].decision, "split: 2 column pieces on devices 1,2");
  EXPECT_TRUE(why[2].alternative.empty()) << why[2].alternative;  // fits no device whole
  EXPECT_EQ(why[2].no_alternative, "none fits in memory");
  EXPECT_EQ(why[2].saving(), 0.0);
  const std::string report = explain_report(task, why);
  EXPECT_NE(report.find("none fits in memory"), std::string::npos);
  EXPECT_LT(report.find("big"), report.find(" a "));  // largest saving first, "a" last
}

TEST(Explain, DeviceRunsAreRanges) {
  // One table in six row pieces on devices 0, 1, 2, 4, 5 and 7.
  const int64_t cap = 1 << 30;
  const PlanTask task = make_task({table("a", 600, 8, 1)}, 4096, std::vector<int64_t>(8, cap), {});
  Plan plan;
  for (int d : {0, 1, 2, 4, 5, 7}) {
    const int i = static_cast<int>(plan.shards.size());
    plan.shards.push_back({0, 0, 8, 100 * i, 100, d, false});
  }
  validate_plan(task, plan);
  testing::ToyCostModel model;
  ShardCosts costs(task, model);
  EXPECT_EQ(explain_plan(task, plan, costs)[0].decision,
            "split: 6 row pieces on devices 0-2,4,5,7");
}

TEST(Explain, PinsAreKept) {
  const int64_t cap = 1 << 30;
  TaskConstraints c;
  c.pins = {{"a", 0}};
  const PlanTask task =
      make_task({table("a", 1000, 64, 20), table("b", 1000, 64, 20)}, 4096, {cap, cap}, c);
  Plan plan;
  plan.shards = {{0, 0, 64, 0, 1000, 0, false}, {1, 0, 64, 0, 1000, 0, false}};
  testing::ToyCostModel model;
  ShardCosts costs(task, model);
  const std::vector<Decision> why = explain_plan(task, plan, costs);
  EXPECT_TRUE(why[0].alternative.empty());  // pinned to device 0: no alternative
  EXPECT_EQ(why[0].no_alternative, "pinned to device 0");
  EXPECT_EQ(why[1].alternative, "whole on device 1");
  EXPECT_NE(explain_report(task, why).find("pinned to device 0"), std::string::npos);
  // One device: nowhere else to go, whatever the memory.
  const PlanTask one = make_task({table("a", 1000, 64, 20)}, 4096, {cap}, {});
  Plan alone;
  alone.shards = {{0, 0, 64, 0, 1000, 0, false}};
  ShardCosts one_costs(one, model);
  EXPECT_EQ(explain_plan(one, alone, one_costs)[0].no_alternative, "no other device");
}

TEST(ModelSourceNotes, SayWhenATaskLeavesWhatWasMeasured) {
  ModelSource s;
  s.hardware = "cpu (1 thread) on X";
  s.host_cpu = cpu_model();
  s.min_batch = 1024;
  s.max_batch = 8192;
  s.min_devices = 2;
  s.max_devices = 8;
  EXPECT_TRUE(extrapolations(s, 4096, 4).empty());
  EXPECT_TRUE(extrapolations(s, 1024, 8).empty());
  const auto both = extrapolations(s, 65536, 16);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_NE(both[0].find("65536"), std::string::npos);
  EXPECT_NE(both[1].find("16 devices"), std::string::npos);
  // All-to-alls measured at fewer batches than the compute: scaled outside them.
  s.comm_min_batch = 2048;
  s.comm_max_batch = 4096;
  ASSERT_EQ(extrapolations(s, 1024, 4).size(), 1u);
  EXPECT_NE(extrapolations(s, 1024, 4)[0].find("all-to-alls were measured at 2048-4096"),
            std::string::npos);
  EXPECT_TRUE(extrapolations(s, 2048, 4).empty());
  s.comm_min_batch = s.comm_max_batch = 0;
  s.host_cpu = "another CPU";
  ASSERT_EQ(extrapolations(s, 4096, 4).size(), 1u);
  EXPECT_NE(extrapolations(s, 4096, 4)[0].find("not this machine"), std::string::npos);
  s.host_cpu.clear();  // a GPU model: no claim about this machine
  s.min_devices = 0;   // comm not measured: no device-count claim
  EXPECT_TRUE(extrapolations(s, 4096, 100).empty());
  EXPECT_NE(describe(s).find("at batches 1024-8192"), std::string::npos);
}

TEST(ModelSourceNotes, PlanJsonAndReportCarryThem) {
  const int64_t cap = 1 << 30;
  const PlanTask task = make_task({table("a", 1000, 64, 20), table("b", 1000, 32, 2)}, 65536,
                                  {cap, cap}, {});
  testing::ToyCostModel toy;
  CostModel model = toy.model;
  model.source.hardware = "toy hardware";
  model.source.min_batch = model.source.max_batch = 2048;
  model.source.comm = "toy comm";
  auto planner = create_planner("neuroshard", {});
  const PlanResult r = make_plan(*planner, task, model);
  ASSERT_EQ(r.extrapolated.size(), 1u);
  const nlohmann::json j = plan_to_json(task, r);
  EXPECT_EQ(j["cost_model_source"]["compute"], "toy hardware");
  EXPECT_EQ(j["cost_model_source"]["batches"][0], 2048);
  EXPECT_EQ(j["cost_model_source"]["extrapolated"].size(), 1u);
  EXPECT_TRUE(j["cost_model_source"]["comm_devices"].is_null());
  const std::string report = plan_report(task, r, false);
  EXPECT_NE(report.find("cost model measured on: compute: toy hardware at batch 2048"),
            std::string::npos);
  EXPECT_NE(report.find("extrapolated: batch 65536 is not the measured 2048"), std::string::npos);
}

TEST(TaskLimits, AbsurdSizesFailBeforeAnySearch) {
  const auto fails_with = [](auto&& f, const std::string& needle) {
    const std::string error = testing::error_of(f);
    EXPECT_NE(error.find(needle), std::string::npos) << "error: '" << error << "'";
  };
  const int64_t cap = int64_t{1} << 40;
  fails_with([&] { make_task({table("huge", int64_t{1000000000000000}, 64, 1)}, 4096, {cap}, {}); },
             "'huge' has 1000000000000000 rows");
  fails_with([&] { make_task({table("wide", 10, 1 << 20, 1)}, 4096, {cap}, {}); },
             "'wide' has dim 1048576");
  fails_with([&] { make_task({table("a", 10, 4, 1)}, int64_t{1} << 40, {cap}, {}); },
             "batch size 1099511627776");
  fails_with([&] { make_task({table("a", 10, 4, 1)}, 4096, std::vector<int64_t>(100000, cap), {}); },
             "100000 devices");
}

}  // namespace
}  // namespace embshard
