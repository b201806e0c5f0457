// Re-planning from a plan file (replan.h): the old layout carried onto grown
// tables, at most K tables moved, never costlier than the old plan, and a
// plan that cannot fit in K moves refused by name.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/plan/plan_file.h"
#include "embshard/plan/report.h"
#include "embshard/search/replan.h"
#include "embshard/util/error.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::random_task;
using testing::ToyCostModel;

PlanFile plan_file_of(const PlanTask& task, const PlanResult& r) {
  return parse_plan_file(plan_to_json(task, r).dump(), "old.json");
}

PlanResult replan(const PlanTask& task, const PlanFile& old, int max_moves) {
  ToyCostModel model;
  auto planner = make_replanner(create_planner("neuroshard", {}), old, max_moves);
  return make_plan(*planner, task, model);
}

// The tables whose shards differ between two plans.
std::set<int> changed(const Plan& a, const Plan& b) {
  std::set<int> out;
  const auto key = [](const Shard& s) {
    return std::tuple(s.table, s.col_offset, s.cols, s.row_offset, s.rows, s.device, s.replica);
  };
  std::multiset<decltype(key(Shard{}))> in_a, in_b;
  for (const Shard& s : a.shards) in_a.insert(key(s));
  for (const Shard& s : b.shards) in_b.insert(key(s));
  for (const Shard& s : a.shards) {
    if (in_a.count(key(s)) != in_b.count(key(s))) out.insert(s.table);
  }
  for (const Shard& s : b.shards) {
    if (in_a.count(key(s)) != in_b.count(key(s))) out.insert(s.table);
  }
  return out;
}

TEST(Replan, NoMovesGivesTheOldPlanAndMovesNeverCostMore) {
  ToyCostModel model;
  const PlanTask task = random_task(24, 4, 1.3, 7);
  // A poor old plan: a greedy baseline's.
  auto greedy = create_planner("size_greedy", {});
  const PlanResult old = make_plan(*greedy, task, model);
  const PlanFile file = plan_file_of(task, old);
  const PlanResult same = replan(task, file, 0);
  EXPECT_TRUE(changed(same.plan, old.plan).empty());
  EXPECT_NEAR(same.predicted.cost_ms, old.predicted.cost_ms, 1e-9);
  double last = old.predicted.cost_ms;
  for (int k : {1, 2, 4, 1000}) {
    SCOPED_TRACE(k);
    const PlanResult r = replan(task, file, k);
    EXPECT_LE(static_cast<int>(changed(r.plan, old.plan).size()), k);
    EXPECT_LE(r.predicted.cost_ms, last * (1 + 1e-9));  // more moves never cost more
    last = r.predicted.cost_ms;
    EXPECT_NE(r.search_summary.find("re-planned from old.json"), std::string::npos);
  }
  EXPECT_LT(last, old.predicted.cost_ms);
}

TEST(Replan, GrownTablesKeepTheirDevicesAndMovesMakeThemFit) {
  ToyCostModel model;
  PlanTask task = random_task(16, 4, 1.5, 3);
  auto planner = create_planner("neuroshard", {});
  const PlanResult old = make_plan(*planner, task, model);
  const PlanFile file = plan_file_of(task, old);
  // Every table 1.4x its rows: the old layout overflows the devices.
  std::vector<TableSpec> grown = task.tables;
  for (TableSpec& t : grown) t.rows = t.rows * 14 / 10;
  int64_t total = 0;
  for (const TableSpec& t : grown) total += task.memory.shard_bytes(t.data_type, t.rows, t.dim);
  const PlanTask bigger = make_task(
      grown, task.batch_size, std::vector<int64_t>(4, total * 13 / 10 / 4), TaskConstraints{});
  const CarriedPlan carried = carry_plan(bigger, file);
  EXPECT_TRUE(carried.unplaced.empty());
  ASSERT_EQ(carried.plan.shards.size(), old.plan.shards.size());
  for (size_t i = 0; i < carried.plan.shards.size(); ++i) {
    EXPECT_EQ(carried.plan.shards[i].device, old.plan.shards[i].device);
  }
  const std::string e = testing::error_of([&] { replan(bigger, file, 0); });
  EXPECT_NE(e.find("after 0 moves (at most 0) the plan still holds"), std::string::npos) << e;
  const PlanResult r = replan(bigger, file, 1000);
  EXPECT_NO_THROW(validate_plan(bigger, r.plan));
}

TEST(Replan, NewDroppedAndChangedTablesAreNamed) {
  ToyCostModel model;
  const PlanTask task = random_task(10, 2, 1.5, 5);
  auto planner = create_planner("neuroshard", {});
  const PlanFile file = plan_file_of(task, make_plan(*planner, task, model));
  std::vector<TableSpec> tables = task.tables;
  tables[3].name = "brand_new";
  tables[4].dim *= 2;
  tables.pop_back();
  const PlanTask now =
      make_task(tables, task.batch_size, std::vector<int64_t>(2, task.device_mem_bytes[0] * 2), {});
  const CarriedPlan c = carry_plan(now, file);
  EXPECT_EQ(c.unplaced, (std::vector<int>{3, 4}));
  const std::string notes = fmt::format("{}", fmt::join(c.notes, "; "));
  EXPECT_NE(notes.find("'brand_new': not in the old plan"), std::string::npos) << notes;
  EXPECT_NE(notes.find(fmt::format("'{}': dim {} there, {} now", tables[4].name, tables[4].dim / 2,
                                   tables[4].dim)),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("'t3': in the old plan, not in the task"), std::string::npos) << notes;
  EXPECT_NE(notes.find("'t9': in the old plan, not in the task"), std::string::npos) << notes;
  const PlanResult r = replan(now, file, 0);  // new tables are placed whatever the limit
  EXPECT_NO_THROW(validate_plan(now, r.plan));
}

}  // namespace
}  // namespace embshard
