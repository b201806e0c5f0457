// Every planner on random tasks: valid plans, caps kept, constraints kept,
// infeasible tasks rejected by name, neuroshard no worse than the greedy
// baselines, the lower bound below every plan.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "embshard/plan/report.h"
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
  no_steps.max_steps = 0;
  no_candidates.candidates = 0;
  expect_error([&] { run("neuroshard", task, no_steps); },
               {"no placement within the memory caps", "--max-steps 0 splits nothing"});
  expect_error([&] { run("neuroshard", task, no_candidates); },
               {"no placement within the memory caps", "--candidates 0 splits nothing"});
}

TEST(Planners, TotalMemoryShortfallIsAnError) {
  std::vector<TableSpec> tables = testing::random_tables(20, 4);
  int64_t total = 0;
  for (const auto& t : tables) total += MemoryModel{}.shard_bytes(t.rows, t.dim);
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
  const int64_t cap = memory.shard_bytes(500'000, 64) + memory.shard_bytes(100'000, 64) * 3 / 2;
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
  full.step_patience = shortcut.step_patience = 0;
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
  expect_fewer_calls_close_plans([](PlannerOptions& o, int v) { o.scan_patience = v; }, 0, 1, -1,
                                 16, {51, 52});
}

// Screening rates only the coarse grid's best children on the whole grid.
TEST(Planners, NeuroShardScreeningCutsModelCallsNotQuality) {
  expect_fewer_calls_close_plans([](PlannerOptions& o, int v) { o.screen_keep = v; }, 0, 1, -1,
                                 8, {53, 54});
}

// Step patience ends a beam that has stopped finding cheaper plans.
TEST(Planners, NeuroShardStepPatienceCutsModelCallsNotQuality) {
  expect_fewer_calls_close_plans([](PlannerOptions& o, int v) { o.step_patience = v; }, 0, 1, -1,
                                 8, {57, 58});
}

// The result says how many steps the beam took and why it stopped.
TEST(Planners, NeuroShardSummarisesItsSearch) {
  const PlanTask task = random_task(60, 8, 1.3, 57);
  PlannerOptions all_steps;
  all_steps.threads = 1;
  all_steps.step_patience = 0;
  all_steps.max_steps = 2;
  EXPECT_EQ(run("neuroshard", task, all_steps).search_summary.rfind("halvings: 2 of 2 beam steps", 0),
            0u);
  PlannerOptions patient;
  patient.threads = 1;
  patient.step_patience = 1;
  const std::string s = run("neuroshard", task, patient).search_summary;
  EXPECT_NE(s.find(" of 10 beam steps (the last 1 without a cheaper plan)"), std::string::npos) << s;
  EXPECT_EQ(run("torchrec", task).search_summary, "");
}

// The wider beam does not rate again what the halvings' beam rated: where
// row splits are allowed but no table can be split (every table one row)
// and replicas are not, it follows the halvings' lineage and costs no model
// call the halvings' beam did not.
TEST(Planners, NeuroShardWiderBeamReusesTheHalvingsRatings) {
  std::vector<TableSpec> tables = testing::random_tables(40, 59);
  for (TableSpec& t : tables) t.rows = t.unique_rows = 1;
  const int64_t cap = MemoryModel().shard_bytes(1, 128) * 12;
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
    ASSERT_GT(base.size(), static_cast<size_t>(PlannerOptions{}.beam_width));
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
  narrow.max_steps = 0;
  narrow.grid_steps = 1;
  const double plain = run("neuroshard", task, narrow).predicted.cost_ms;
  const double full = run("neuroshard", task).predicted.cost_ms;
  EXPECT_LE(full, plain * (1 + 1e-9));
}

}  // namespace
}  // namespace embshard

namespace embshard {
namespace {

// A truth that disagrees with the toy model: device compute doubled for
// every device but the first, so a measured ranking differs from the
// predicted one.
class SkewedCompute : public ComputeModel {
 public:
  explicit SkewedCompute(ComputeModel& inner) : inner_(inner) {}
  std::string name() const override { return "skewed"; }
  int64_t batch_size() const override { return inner_.batch_size(); }
  int add_table(const TableFeatures& t) override { return inner_.add_table(t); }
  double compute_ms(std::span<const int> ids) const override {
    double ms = inner_.compute_ms(ids);
    for (int id : ids) ms += 0.01 * (id % 7);
    return ms;
  }

 private:
  ComputeModel& inner_;
};

TEST(Verification, CandidatesAreDistinctBestFirstAndTheMeasuredFastestIsChosen) {
  const PlanTask task = testing::random_task(30, 4, 1.3, 11);
  testing::ToyCostModel model;
  auto planner = create_planner("neuroshard", {});
  ShardCosts costs(task, model);
  const std::vector<Plan> plans = planner->plan_candidates(task, costs, 5);
  ASSERT_GE(plans.size(), 2u);
  ASSERT_LE(plans.size(), 5u);
  std::vector<double> predicted;
  for (const Plan& p : plans) {
    validate_plan(task, p);
    predicted.push_back(predict_plan(task, p, costs).cost_ms);
  }
  EXPECT_TRUE(std::is_sorted(predicted.begin(), predicted.end()));
  for (size_t i = 1; i < plans.size(); ++i) {
    EXPECT_NE(plans[i].shards.size() == plans[0].shards.size() &&
                  std::equal(plans[i].shards.begin(), plans[i].shards.end(),
                             plans[0].shards.begin(),
                             [](const Shard& a, const Shard& b) {
                               return a.table == b.table && a.cols == b.cols && a.device == b.device;
                             }),
              true)
        << "candidate " << i << " repeats the first";
  }
  // The first candidate is the plan the search returns alone.
  const PlanResult plain = make_plan(*planner, task, model);
  EXPECT_DOUBLE_EQ(plain.predicted.cost_ms, predicted.front());

  const CostModel truth{std::make_shared<SkewedCompute>(*model.compute), model.model.comm, "skewed"};
  const PlanResult v = make_verified_plan(*planner, task, model, truth, {.candidates = 5});
  ASSERT_TRUE(v.verification.has_value());
  const Verification& ver = *v.verification;
  EXPECT_EQ(ver.candidates.size(), plans.size());
  for (const VerifiedCandidate& c : ver.candidates) {
    EXPECT_GE(c.measured_ms, ver.candidates[ver.chosen].measured_ms);
  }
  EXPECT_DOUBLE_EQ(v.predicted.cost_ms, ver.candidates[ver.chosen].predicted.cost_ms);
  // A heuristic has one plan: verification measures it alone.
  auto greedy = create_planner("size_greedy", {});
  const PlanResult g = make_verified_plan(*greedy, task, model, truth, {.candidates = 5});
  EXPECT_EQ(g.verification->candidates.size(), 1u);
  EXPECT_THROW(make_verified_plan(*planner, task, model, truth, {.candidates = -1}), Error);
}

// A truth under which every third table (by rows) costs up to 1.8x what the
// toy model says: a per-table error the model does not know.
class SlowTables : public ComputeModel {
 public:
  std::string name() const override { return "slow tables"; }
  int64_t batch_size() const override { return inner_.batch_size(); }
  int add_table(const TableFeatures& t) override {
    slow_.push_back(t.rows % 3 == 0);
    return inner_.add_table(t);
  }
  double compute_ms(std::span<const int> ids) const override {
    double slow = 0, all = 0;
    for (int id : ids) {
      const int one[] = {id};
      const double ms = inner_.compute_ms(one);
      all += ms;
      if (slow_.at(id)) slow += ms;
    }
    return inner_.compute_ms(ids) * (1 + 0.8 * (all > 0 ? slow / all : 0.0));
  }

 private:
  testing::ToyComputeModel inner_;
  std::vector<bool> slow_;
};

TEST(Verification, LaterRoundsPlanAgainstTheMeasuredErrorsAndMeasureFaster) {
  const PlanTask task = random_task(30, 4, 1.3, 11);
  ToyCostModel model(true);
  auto planner = create_planner("neuroshard", {});
  const CostModel truth{std::make_shared<SlowTables>(), model.model.comm, "slow tables"};
  const PlanResult one = make_verified_plan(*planner, task, model, truth, {.candidates = 3});
  const PlanResult three =
      make_verified_plan(*planner, task, model, truth, {.candidates = 3, .rounds = 3});
  const auto& first = one.verification->candidates;
  const auto& all = three.verification->candidates;
  EXPECT_EQ(three.verification->rounds, 3);
  // The first round is the one-round verification's, plan for plan.
  ASSERT_GT(all.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(all[i].round, 0);
    EXPECT_DOUBLE_EQ(all[i].measured_ms, first[i].measured_ms);
  }
  EXPECT_GT(all.back().round, 0);
  for (const VerifiedCandidate& c : all) validate_plan(task, c.plan);
  // The corrected rounds find a plan that measures faster than any the
  // model alone proposed.
  const double before = first[one.verification->chosen].measured_ms;
  const double after = all[three.verification->chosen].measured_ms;
  EXPECT_LT(after, 0.98 * before) << before << " ms -> " << after << " ms";
  EXPECT_GT(all[three.verification->chosen].round, 0);

  // Where the model is exact, there is nothing to correct: no new plans.
  const PlanResult exact =
      make_verified_plan(*planner, task, model, model, {.candidates = 3, .rounds = 3});
  EXPECT_EQ(exact.verification->candidates.size(),
            make_verified_plan(*planner, task, model, model, {.candidates = 3})
                .verification->candidates.size());
  for (const VerifiedCandidate& c : exact.verification->candidates) EXPECT_EQ(c.round, 0);
  EXPECT_EQ(exact.verification->rounds, 2);  // the second found nothing new: the last
  EXPECT_THROW(make_verified_plan(*planner, task, model, truth, {.candidates = 3, .rounds = 0}),
               Error);
}

// Communication as the toy model has it, but the calls numbered [first,
// last) (from 0) run through one of the machine's slow stretches: 5 ms more.
class SlowStretchComm : public CommModel {
 public:
  SlowStretchComm(int64_t first, int64_t last) : first_(first), last_(last) {}
  std::string name() const override { return "slow stretch"; }
  void comm_ms(std::span<const double> dims, std::span<const double> delays,
               std::span<double> fwd, std::span<double> bwd) const override {
    inner_.comm_ms(dims, delays, fwd, bwd);
    if (calls >= first_ && calls < last_) {
      for (double& f : fwd) f += 5;
    }
    ++calls;
  }
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd,
                     std::span<double> bwd) const override {
    inner_.collective_ms(load, fwd, bwd);
  }
  mutable int64_t calls = 0;

 private:
  testing::ToyCommModel inner_;
  int64_t first_, last_;
};

TEST(Verification, PassesKeepOneSlowStretchFromDecidingTheChoice) {
  const PlanTask task = random_task(30, 4, 1.3, 11);
  ToyCostModel model(true);
  auto planner = create_planner("neuroshard", {});
  // Measured compute that disagrees with the model; communication with a
  // slow stretch over the calls [first, last).
  std::shared_ptr<SlowStretchComm> comm;
  const auto truth = [&](int64_t first, int64_t last) {
    comm = std::make_shared<SlowStretchComm>(first, last);
    return CostModel{std::make_shared<SlowTables>(), comm, "slow stretch", {}};
  };
  // Without slow stretches: which candidate is fastest, and how many calls
  // one measurement of a plan makes.
  const PlanResult quiet =
      make_verified_plan(*planner, task, model, truth(0, 0), {.candidates = 4});
  const auto& all = quiet.verification->candidates;
  ASSERT_GE(all.size(), 3u);
  const int64_t per_plan = comm->calls / static_cast<int64_t>(all.size());
  ASSERT_EQ(per_plan * static_cast<int64_t>(all.size()), comm->calls);
  const int fastest = quiet.verification->chosen;
  for (const VerifiedCandidate& c : all) EXPECT_EQ(c.measured_ms, c.measured.cost_ms);

  // The fastest plan's one measurement falls in a slow stretch: one pass
  // chooses another plan, three passes choose it, on its quiet figure.
  const int64_t first = per_plan * fastest, last = per_plan * (fastest + 1);
  const PlanResult one =
      make_verified_plan(*planner, task, model, truth(first, last), {.candidates = 4});
  EXPECT_NE(one.verification->chosen, fastest);
  EXPECT_GT(one.verification->candidates[fastest].measured_ms, all[fastest].measured_ms + 4);
  const PlanResult three = make_verified_plan(*planner, task, model, truth(first, last),
                                              {.candidates = 4, .comm_passes = 3});
  const Verification& v = *three.verification;
  EXPECT_EQ(v.comm_passes, 3);
  EXPECT_EQ(comm->calls, 3 * per_plan * static_cast<int64_t>(all.size()));
  EXPECT_EQ(v.chosen, fastest);
  const VerifiedCandidate& c = v.candidates[fastest];
  ASSERT_EQ(c.passes_ms.size(), 3u);
  EXPECT_GT(c.passes_ms[0], c.passes_ms[1] + 4);
  EXPECT_DOUBLE_EQ(c.measured_ms, all[fastest].measured_ms);
  EXPECT_DOUBLE_EQ(c.measured.cost_ms, c.measured_ms);  // the fastest pass
  EXPECT_NE(verification_report(v).find("each 3 times"), std::string::npos);
  EXPECT_THROW(make_verified_plan(*planner, task, model, truth(0, 0),
                                  {.candidates = 4, .comm_passes = 0}),
               Error);
  EXPECT_THROW(make_verified_plan(*planner, task, model, truth(0, 0),
                                  {.candidates = 4, .comm_passes = 2, .pass_pause_s = -1}),
               Error);
}

// Hands verification its search's plans with the first one again under other
// device labels.
class Relabelling : public Planner {
 public:
  std::string name() const override { return "relabelling"; }
  Plan plan(const PlanTask& task, ShardCosts& costs) override {
    return inner_->plan(task, costs);
  }
  std::vector<Plan> plan_candidates(const PlanTask& task, ShardCosts& costs,
                                    int count) override {
    std::vector<Plan> plans = inner_->plan_candidates(task, costs, count);
    Plan swapped = plans.front();
    for (Shard& s : swapped.shards) s.device = task.num_devices() - 1 - s.device;
    plans.insert(plans.begin() + 1, swapped);
    return plans;
  }

 private:
  std::unique_ptr<Planner> inner_ = create_planner("neuroshard", {});
};

TEST(Verification, PlansThatDifferOnlyInDeviceLabelsAreMeasuredOnce) {
  // Row-wise blocks keep their ranks (TorchRec's order): no relabelling there.
  PlanTask task = random_task(30, 4, 1.3, 11);
  task.types = ShardingTypes::parse("table_wise,column_wise", "--sharding-types");
  ToyCostModel model(true);
  Relabelling relabelling;
  auto planner = create_planner("neuroshard", {});
  const PlanResult r = make_verified_plan(relabelling, task, model, model, {.candidates = 3});
  const PlanResult plain = make_verified_plan(*planner, task, model, model, {.candidates = 3});
  ASSERT_EQ(r.verification->candidates.size(), plain.verification->candidates.size());
  for (size_t i = 0; i < plain.verification->candidates.size(); ++i) {
    EXPECT_EQ(r.verification->candidates[i].plan.shards.size(),
              plain.verification->candidates[i].plan.shards.size());
    EXPECT_DOUBLE_EQ(r.verification->candidates[i].measured_ms,
                     plain.verification->candidates[i].measured_ms);
  }
}

TEST(Verification, TraceHasATrackPerDeviceAndEndsAtTheCost) {
  const PlanTask task = testing::random_task(12, 3, 1.3, 5);
  testing::ToyCostModel model;
  const PlanResult r = run("neuroshard", task);
  const nlohmann::json trace = iteration_trace(task, r.plan, r.predicted, "predicted");
  std::set<int> tracks;
  double end_ms = 0, last_done_ms = 0;
  std::vector<double> transfer_starts_ms;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    tracks.insert(e["tid"].get<int>());
    EXPECT_GT(e["dur"].get<double>(), 0);
    const double start_ms = e["ts"].get<double>() / 1e3;
    end_ms = std::max(end_ms, start_ms + e["dur"].get<double>() / 1e3);
    if (e["name"] == "backward all-to-all") {
      last_done_ms = std::max(last_done_ms, start_ms + e["dur"].get<double>() / 1e3);
    }
    if (e["name"] == "forward all-to-all") transfer_starts_ms.push_back(start_ms);
  }
  EXPECT_EQ(tracks.size(), 3u);
  // Who waits for whom: every forward transfer starts when the last device is done.
  ASSERT_EQ(transfer_starts_ms.size(), 3u);
  for (double t : transfer_starts_ms) EXPECT_NEAR(t, last_done_ms, 1e-9 * last_done_ms);
  EXPECT_NEAR(end_ms, r.predicted.cost_ms, 1e-9 * r.predicted.cost_ms);
}

TEST(Verification, TraceShowsMeasuredBesidePredictedWithEachDevicesPieces) {
  const PlanTask task = testing::random_task(12, 3, 1.3, 5);
  const PlanResult r = run("neuroshard", task);
  // A "measurement": the same plan with every device's compute 1.5x.
  PlanPrediction measured = r.predicted;
  for (DeviceCosts& c : measured.devices) c.compute_ms *= 1.5;
  const nlohmann::json trace =
      iteration_trace(task, r.plan, measured, "measured", &r.predicted, "predicted");
  std::map<int, double> end_ms;             // per process
  std::map<int, std::set<int>> tracks;      // per process
  std::multiset<std::pair<int, std::string>> pieces;  // process 0's compute slices: (lane, piece)
  std::set<std::string> processes;
  for (const auto& e : trace["traceEvents"]) {
    const int pid = e["pid"].get<int>();
    if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    tracks[pid].insert(e["tid"].get<int>());
    end_ms[pid] = std::max(end_ms[pid], (e["ts"].get<double>() + e["dur"].get<double>()) / 1e3);
    if (e["cat"] == "compute" && pid == 0) {
      for (const auto& p : e["args"]["pieces"]) pieces.insert({e["tid"].get<int>(), p.get<std::string>()});
    }
  }
  EXPECT_EQ(processes, (std::set<std::string>{"measured", "predicted"}));
  EXPECT_EQ(tracks[0].size(), 3u);
  EXPECT_EQ(tracks[1].size(), 3u);
  EXPECT_NEAR(end_ms[1], r.predicted.cost_ms, 1e-9 * r.predicted.cost_ms);
  EXPECT_GT(end_ms[0], end_ms[1]);
  EXPECT_DOUBLE_EQ(trace["otherData"]["predicted_cost_ms"].get<double>(), r.predicted.cost_ms);
  // Every shard is named on its own device's compute slice (two equal column
  // pieces of a table on one device read alike).
  EXPECT_EQ(pieces.size(), r.plan.shards.size());
  for (const Shard& s : r.plan.shards) {
    EXPECT_GE(pieces.count({s.device, task.tables[s.table].name + " " +
                                          piece_text(s.cols, s.row_offset, s.rows,
                                                     task.tables[s.table].rows, s.replica)}),
              1u);
  }
}

}  // namespace
}  // namespace embshard
