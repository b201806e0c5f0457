// Every planner on random tasks: valid plans, caps kept, constraints kept,
// infeasible tasks rejected by name, neuroshard no worse than the greedy
// baselines, the lower bound below every plan.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <functional>

#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"

namespace embshard {
namespace {

using testing::random_task;
using testing::ToyCostModel;

PlanResult run(const std::string& algo, const PlanTask& task, PlannerOptions options = {},
               bool incremental = false) {
  ToyCostModel model(incremental);
  auto planner = create_planner(algo, options);
  return make_plan(*planner, task, model);
}

TEST(Planners, RegistryListsValidNamesOnUnknown) {
  try {
    create_planner("greedy", {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown planner 'greedy'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("random, size_greedy, dim_greedy, lookup_greedy, "
                                         "size_lookup_greedy, torchrec, neuroshard"),
              std::string::npos)
        << e.what();
  }
  for (const std::string& name : planner_names()) EXPECT_EQ(create_planner(name, {})->name(), name);
}

TEST(Planners, ValidPlansWithinCapsOnRandomTasks) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const int devices = 2 + static_cast<int>(seed % 4) * 2;
    const PlanTask task = random_task(10 + 5 * static_cast<int>(seed), devices, 1.25, seed);
    for (const std::string& algo : planner_names()) {
      SCOPED_TRACE(fmt::format("seed {} algo {}", seed, algo));
      const PlanResult r = run(algo, task);
      EXPECT_NO_THROW(validate_plan(task, r.plan));
      const auto used = device_memory_bytes(task, r.plan);
      for (int d = 0; d < devices; ++d) EXPECT_LE(used[d], task.device_mem_bytes[d]);
      EXPECT_LE(r.bound.total_ms(), r.predicted.cost_ms * (1 + 1e-9));
      EXPECT_GE(r.gap(), -1e-9);
    }
  }
}

TEST(Planners, NeuroShardAtLeastAsGoodAsGreedyBaselines) {
  int strictly_better = 0;
  for (uint64_t seed = 11; seed <= 20; ++seed) {
    const int devices = seed % 2 ? 4 : 8;
    const PlanTask task = random_task(20 + 4 * static_cast<int>(seed % 10), devices, 1.3, seed);
    const double ns = run("neuroshard", task).predicted.cost_ms;
    double best_baseline = 1e300;
    for (const char* algo : {"random", "size_greedy", "dim_greedy", "lookup_greedy",
                             "size_lookup_greedy", "torchrec"}) {
      const double c = run(algo, task).predicted.cost_ms;
      EXPECT_LE(ns, c * (1 + 1e-9)) << "seed " << seed << " vs " << algo;
      best_baseline = std::min(best_baseline, c);
    }
    if (ns < best_baseline * 0.999) ++strictly_better;
  }
  // The search must actually find something the heuristics miss.
  EXPECT_GE(strictly_better, 5);
}

TEST(Planners, PinsAndNoSplitAreKept) {
  TaskConstraints c;
  c.pins = {{"t0", 1}, {"t3", 0}};
  c.no_split = {"t1", "t2", "t4"};
  const PlanTask task = random_task(24, 4, 1.3, 7, c);
  for (const std::string& algo : planner_names()) {
    SCOPED_TRACE(algo);
    const PlanResult r = run(algo, task);
    int pieces[5] = {0, 0, 0, 0, 0};
    for (const Shard& s : r.plan.shards) {
      if (s.table == 0) { EXPECT_EQ(s.device, 1); }
      if (s.table == 3) { EXPECT_EQ(s.device, 0); }
      if (s.table < 5) ++pieces[s.table];
    }
    for (int t = 0; t < 5; ++t) EXPECT_EQ(pieces[t], 1) << "table " << t;
  }
}

TEST(Planners, NeuroShardSplitsOnlyIntoAllowedWidths) {
  TaskConstraints c;
  c.split.allowed = {64, 128};  // so 128 -> 64 only
  const PlanTask task = random_task(16, 4, 1.3, 3, c);
  const PlanResult r = run("neuroshard", task);
  for (const Shard& s : r.plan.shards) {
    if (s.cols != task.tables[s.table].dim) { EXPECT_TRUE(s.cols == 64 || s.cols == 128); }
  }
}

TEST(Planners, OversizedTableIsSplitToFit) {
  std::vector<TableSpec> tables = testing::random_tables(8, 5);
  tables[2].rows = 2'000'000;
  tables[2].dim = 128;  // ~1 GB, devices of 0.6 GB
  // Table- and column-wise only (the full space may also split its rows:
  // tests/search/test_sharding_search.cpp).
  TaskConstraints twcw;
  twcw.types = ShardingTypes::parse("table_wise,column_wise", "--sharding-types");
  const PlanTask task = make_task(tables, 4096, std::vector<int64_t>(4, 600'000'000), twcw);
  for (const std::string& algo : planner_names()) {
    SCOPED_TRACE(algo);
    EXPECT_EQ(sharding_type(task, run(algo, task).plan, 2), "column_wise");
  }
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(Planners, InfeasibleTasksNameTheTable) {
  std::vector<TableSpec> tables = testing::random_tables(6, 9);
  tables[4].name = "huge";
  tables[4].rows = 50'000'000;
  tables[4].dim = 16;
  TaskConstraints no_split;
  no_split.no_split = {"huge"};
  expect_error([&] { make_task(tables, 4096, std::vector<int64_t>(4, 1'000'000'000), no_split); },
               {"table 'huge'", "50000000 rows x dim 16", "3.400 GB", "1.000 GB"});
  TaskConstraints pin;
  pin.pins = {{"huge", 2}};
  expect_error([&] { make_task(tables, 4096, {8'000'000'000, 8'000'000'000, 1'000'000'000}, pin); },
               {"table 'huge'", "pinned to device 2", "3.400 GB", "1.000 GB"});
  // Splittable, but even dim-4 pieces are 1 GB (row pieces excluded), or a
  // quarter of its rows still is.
  tables[4].rows = 200'000'000;
  TaskConstraints twcw;
  twcw.types = ShardingTypes::parse("table_wise,column_wise", "--sharding-types");
  expect_error([&] { make_task(tables, 4096, std::vector<int64_t>(4, 1'000'000'000), twcw); },
               {"table 'huge'", "column piece", "4 columns", "row_wise is not among"});
  tables[4].rows = 900'000'000;
  expect_error([&] { make_task(tables, 4096, std::vector<int64_t>(4, 1'000'000'000), {}); },
               {"table 'huge'", "row piece (4 devices' share of its rows)"});
  tables[4].rows = 10;
  expect_error([&] { make_task(tables, 4096, {}, {}); }, {"at least one device"});
  TaskConstraints bad_pin;
  bad_pin.pins = {{"nope", 0}};
  expect_error([&] { make_task(tables, 4096, {1'000'000'000}, bad_pin); }, {"'nope'"});
  expect_error([] { device_capacities(3, 0, {1, 2}); }, {"--mem lists 2", "--devices is 3"});
  expect_error([] { device_capacities(0, 10, {}); }, {"--devices is 0"});
}

// A task that fits only once the search splits further than its start:
// without beam steps or candidates the error says so.
TEST(Planners, NeuroShardWithoutStepsOrCandidatesSaysWhyNothingFits) {
  std::vector<TableSpec> tables = testing::random_tables(2, 3);
  tables[0].name = "big";  // its start pieces are quarters, one per device
  tables[0].rows = 4'000'000;
  tables[0].dim = 128;
  tables[1].name = "mid";  // whole it fits beside no quarter; its halves do
  tables[1].rows = 1'000'000;
  tables[1].dim = 32;
  TaskConstraints twcw;
  twcw.types = ShardingTypes::parse("table_wise,column_wise", "--sharding-types");
  const PlanTask task = make_task(tables, 4096, std::vector<int64_t>(4, 600'000'000), twcw);
  EXPECT_NO_THROW(run("neuroshard", task));
  PlannerOptions no_steps, no_candidates;
  no_steps.budget.max_steps = 0;
  no_candidates.budget.candidates = 0;
  expect_error([&] { run("neuroshard", task, no_steps); },
               {"no placement within the memory caps", "max-steps 0 splits nothing"});
  expect_error([&] { run("neuroshard", task, no_candidates); },
               {"no placement within the memory caps", "candidates 0 splits nothing"});
}

TEST(Planners, TotalMemoryShortfallIsAnError) {
  std::vector<TableSpec> tables = testing::random_tables(20, 4);
  int64_t total = 0;
  for (const auto& t : tables) total += MemoryModel{}.shard_bytes(DataType::kFp32, t.rows, t.dim);
  expect_error([&] { make_task(tables, 4096, std::vector<int64_t>(2, total / 3), {}); },
               {"the tables need"});
}

// A table nearly a device's size whose cost is low: NeuroShard's order (by
// cost) spreads the costly small tables over both devices first and leaves
// it no room; the search then places the big pieces first.
TEST(Planners, NeuroShardPlacesABigCheapTableWhereCostOrderLeavesNoRoom) {
  std::vector<TableSpec> tables = testing::random_tables(5, 11);
  for (TableSpec& t : tables) t.rows = 100'000, t.dim = 64, t.pooling_factor = 30;
  tables[0].name = "big";
  tables[0].rows = 500'000;
  tables[0].pooling_factor = 1;
  const MemoryModel memory;
  // Each device holds the big table and one small one, or four small ones.
  const int64_t cap = memory.shard_bytes(DataType::kFp32, 500'000, 64) +
                      memory.shard_bytes(DataType::kFp32, 100'000, 64) * 3 / 2;
  TaskConstraints tw;
  tw.types = ShardingTypes::parse("table_wise", "--sharding-types");
  const PlanTask task = make_task(tables, 4096, std::vector<int64_t>(2, cap), tw);
  const PlanResult r = run("neuroshard", task);
  int big_device = -1;
  for (const Shard& s : r.plan.shards) {
    if (s.table == 0) big_device = s.device;
  }
  ASSERT_GE(big_device, 0);
  int with_big = 0;
  for (const Shard& s : r.plan.shards) with_big += s.device == big_device ? 1 : 0;
  EXPECT_LE(with_big, 2);
}

// A shortcut of the search (an option `set` to `on`, against `off`) keeps
// plans valid (make_plan validates) and close to the full search's, for fewer
// model calls; `bad` is refused.
template <class Set>
void expect_fewer_calls_close_plans(Set set, int off, int on, int bad, int devices,
                                    std::initializer_list<uint64_t> seeds) {
  PlannerOptions full, shortcut, refused;
  full.threads = shortcut.threads = 1;
  // All of NeuroShard's steps, so that only the option differs in the work.
  full.budget.step_patience = shortcut.budget.step_patience = 0;
  set(full, off);
  set(shortcut, on);
  set(refused, bad);
  for (uint64_t seed : seeds) {
    const PlanTask task = random_task(60, devices, 1.3, seed);
    ToyCostModel full_model(true), short_model(true);
    const PlanResult a = make_plan(*create_planner("neuroshard", full), task, full_model.model);
    const PlanResult b = make_plan(*create_planner("neuroshard", shortcut), task, short_model.model);
    SCOPED_TRACE(fmt::format("seed {}", seed));
    EXPECT_LT(short_model.compute->calls, full_model.compute->calls);
    EXPECT_LE(b.predicted.cost_ms, a.predicted.cost_ms * 1.05);
  }
  EXPECT_THROW(create_planner("neuroshard", refused), Error);
}

// Patience stops a piece's device scan early.
TEST(Planners, NeuroShardScanPatienceCutsModelCallsNotQuality) {
  expect_fewer_calls_close_plans([](PlannerOptions& o, int v) { o.budget.scan_patience = v; }, 0, 1,
                                 -1, 16, {51, 52});
}

// Screening rates only the coarse grid's best children on the whole grid.
TEST(Planners, NeuroShardScreeningCutsModelCallsNotQuality) {
  expect_fewer_calls_close_plans([](PlannerOptions& o, int v) { o.budget.screen_keep = v; }, 0, 1,
                                 -1, 8, {53, 54});
}

// Step patience ends a beam that has stopped finding cheaper plans.
TEST(Planners, NeuroShardStepPatienceCutsModelCallsNotQuality) {
  expect_fewer_calls_close_plans([](PlannerOptions& o, int v) { o.budget.step_patience = v; }, 0, 1,
                                 -1, 8, {57, 58});
}

// The result says how many steps the beam took and why it stopped.
TEST(Planners, NeuroShardSummarisesItsSearch) {
  const PlanTask task = random_task(60, 8, 1.3, 57);
  PlannerOptions all_steps;
  all_steps.threads = 1;
  all_steps.budget.step_patience = 0;
  all_steps.budget.max_steps = 2;
  EXPECT_EQ(run("neuroshard", task, all_steps).search_summary.rfind("halvings: 2 of 2 beam steps", 0),
            0u);
  PlannerOptions patient;
  patient.threads = 1;
  patient.budget.step_patience = 1;
  const std::string s = run("neuroshard", task, patient).search_summary;
  EXPECT_NE(s.find(" of 10 beam steps (the last 1 without a cheaper plan)"), std::string::npos) << s;
  EXPECT_EQ(run("torchrec", task).search_summary, "");
}

// The wider beams do not rate again what the halvings' beam rated: where
// row splits are allowed but no table can be split (every table one row)
// and replicas are not, the every-move beam follows the halvings' lineage,
// the beam without halvings has no move, and the search costs no model call
// the halvings' beam did not.
TEST(Planners, NeuroShardWiderBeamsReuseTheHalvingsRatings) {
  std::vector<TableSpec> tables = testing::random_tables(40, 59);
  for (TableSpec& t : tables) t.rows = t.unique_rows = 1;
  const int64_t cap = MemoryModel().shard_bytes(DataType::kFp32, 1, 128) * 12;
  auto search = [&](const char* types, const char* phases) {
    TaskConstraints c;
    c.types = ShardingTypes::parse(types, "--sharding-types");
    const PlanTask task = make_task(tables, 4096, std::vector<int64_t>(4, cap), c);
    PlannerOptions o;
    o.threads = 1;
    ToyCostModel model(true);
    const PlanResult r = make_plan(*create_planner("neuroshard", o), task, model.model);
    EXPECT_NE(r.search_summary.find(phases), std::string::npos) << r.search_summary;
    return std::make_pair(r.predicted.cost_ms, model.compute->calls);
  };
  const auto every = search("table_wise,column_wise,row_wise", "every move: ");
  const auto halvings = search("table_wise,column_wise", "halvings: ");
  EXPECT_EQ(every.first, halvings.first);
  EXPECT_EQ(every.second, halvings.second);
  EXPECT_GT(halvings.second, 0);
}

TEST(Planners, DeterministicForAFixedSeed) {
  const PlanTask task = random_task(30, 4, 1.3, 21);
  for (const char* algo : {"random", "neuroshard"}) {
    const PlanResult a = run(algo, task), b = run(algo, task);
    ASSERT_EQ(a.plan.shards.size(), b.plan.shards.size());
    for (size_t i = 0; i < a.plan.shards.size(); ++i) {
      EXPECT_EQ(a.plan.shards[i].device, b.plan.shards[i].device);
    }
  }
}

// Threads rate a beam step's candidates against a shared cutoff, and the
// incremental state replaces compute_ms calls: neither may change the plan.
TEST(Planners, NeuroShardSamePlanForAnyThreadCountAndCostPath) {
  for (uint64_t seed : {41, 42, 43}) {
    const PlanTask task = random_task(40, 2 + static_cast<int>(seed % 5), 1.3, seed);
    PlannerOptions one;
    one.threads = 1;
    const PlanResult base = run("neuroshard", task, one);
    for (int threads : {1, 2, 3}) {
      for (bool incremental : {false, true}) {
        if (threads == 1 && !incremental) continue;
        PlannerOptions o;
        o.threads = threads;
        const PlanResult r = run("neuroshard", task, o, incremental);
        SCOPED_TRACE(fmt::format("seed {} threads {} incremental {}", seed, threads, incremental));
        EXPECT_NEAR(r.predicted.cost_ms, base.predicted.cost_ms, 1e-9 * base.predicted.cost_ms);
        ASSERT_EQ(r.plan.shards.size(), base.plan.shards.size());
        for (size_t i = 0; i < r.plan.shards.size(); ++i) {
          EXPECT_EQ(r.plan.shards[i].table, base.plan.shards[i].table);
          EXPECT_EQ(r.plan.shards[i].cols, base.plan.shards[i].cols);
          EXPECT_EQ(r.plan.shards[i].device, base.plan.shards[i].device);
        }
      }
    }
  }
  PlannerOptions bad;
  bad.threads = -1;
  EXPECT_THROW(create_planner("neuroshard", bad), Error);
}

// Verification asks for more candidates than the beam is wide: the plans it
// gets may not depend on which thread rated which child first.
TEST(Planners, NeuroShardSameCandidatesForAnyThreadCount) {
  for (uint64_t seed : {44, 45}) {
    const PlanTask task = random_task(40, 4, 1.3, seed);
    ToyCostModel model(true);
    const auto candidates = [&](int threads) {
      PlannerOptions o;
      o.threads = threads;
      ShardCosts costs(task, model);
      return create_planner("neuroshard", o)->plan_candidates(task, costs, 8);
    };
    const std::vector<Plan> base = candidates(1);
    ASSERT_GT(base.size(), static_cast<size_t>(SearchBudget{}.beam_width));
    for (int round = 0; round < 4; ++round) {
      for (int threads : {2, 3}) {
        const std::vector<Plan> other = candidates(threads);
        SCOPED_TRACE(fmt::format("seed {} threads {} round {}", seed, threads, round));
        ASSERT_EQ(other.size(), base.size());
        for (size_t c = 0; c < base.size(); ++c) {
          ASSERT_EQ(other[c].shards.size(), base[c].shards.size()) << "candidate " << c;
          for (size_t i = 0; i < base[c].shards.size(); ++i) {
            const Shard &a = other[c].shards[i], &b = base[c].shards[i];
            EXPECT_EQ(std::tie(a.table, a.col_offset, a.cols, a.row_offset, a.rows, a.replica,
                               a.device),
                      std::tie(b.table, b.col_offset, b.cols, b.row_offset, b.rows, b.replica,
                               b.device))
                << "candidate " << c << " shard " << i;
          }
        }
      }
    }
  }
}

TEST(Planners, NeuroShardPredictionMatchesSearchAndOptionsMatter) {
  const PlanTask task = random_task(30, 8, 1.3, 31);
  PlannerOptions narrow;
  narrow.budget.max_steps = 0;
  narrow.budget.grid_steps = 1;
  const double plain = run("neuroshard", task, narrow).predicted.cost_ms;
  const double full = run("neuroshard", task).predicted.cost_ms;
  EXPECT_LE(full, plain * (1 + 1e-9));
}

}  // namespace
}  // namespace embshard
