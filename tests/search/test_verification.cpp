// Verification (Planner::plan_candidates measured on a truth): the measured
// fastest chosen, rounds against the measured errors, passes, plans under
// other device labels measured once; the iteration trace of a plan.
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
#include "test_util.h"

namespace embshard {
namespace {

using testing::random_task;
using testing::ToyCostModel;

// A truth that disagrees with the toy model: device compute doubled for
// every device but the first, so a measured ranking differs from the
// predicted one.
class SkewedCompute : public testing::WrappedCompute {
 public:
  explicit SkewedCompute(ComputeModel& inner) : WrappedCompute(inner, "skewed") {}
  double compute_ms(std::span<const int> ids) const override {
    double ms = inner_.compute_ms(ids);
    for (int id : ids) ms += 0.01 * (id % 7);
    return ms;
  }
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

  const CostModel truth{
      std::make_shared<SkewedCompute>(*model.compute), model.model.comm, "skewed", {}};
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
  const CostModel truth{std::make_shared<SlowTables>(), model.model.comm, "slow tables", {}};
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

TEST(Verification, TablesMeasuredAloneCorrectTheFirstSearch) {
  const PlanTask task = random_task(30, 4, 1.3, 11);
  ToyCostModel model(true);
  auto planner = create_planner("neuroshard", {});
  const CostModel truth{std::make_shared<SlowTables>(), model.model.comm, "slow tables", {}};
  const PlanResult plain = make_verified_plan(*planner, task, model, truth, {.candidates = 3});
  const PlanResult tables = make_verified_plan(*planner, task, model, truth,
                                               {.candidates = 3, .measure_tables = true});
  const Verification& v = *tables.verification;
  ASSERT_EQ(v.tables.size(), 30u);
  for (int t = 0; t < 30; ++t) {
    const Verification::TableAlone& alone = v.tables[t];
    EXPECT_EQ(alone.name, task.tables[t].name);
    EXPECT_GT(alone.predicted_ms, 0);
    // SlowTables: every third table by rows 1.8x the model alone, the rest 1x.
    EXPECT_NEAR(alone.measured_ms / alone.predicted_ms, task.tables[t].rows % 3 == 0 ? 1.8 : 1.0,
                1e-9)
        << alone.name;
  }
  EXPECT_GE(v.tables_s, 0);
  EXPECT_GE(v.verify_s, v.tables_s);
  EXPECT_TRUE(plain.verification->tables.empty());
  ShardCosts costs(task, model);
  for (const VerifiedCandidate& c : v.candidates) {
    EXPECT_EQ(c.round, 0);
    validate_plan(task, c.plan);
    // Predicted on the model as it is, like every candidate.
    EXPECT_DOUBLE_EQ(c.predicted.cost_ms, predict_plan(task, c.plan, costs).cost_ms);
  }
  // One round that knows the slow tables beats one that does not.
  const double before = plain.verification->candidates[plain.verification->chosen].measured_ms;
  const double after = v.candidates[v.chosen].measured_ms;
  EXPECT_LT(after, 0.98 * before) << before << " ms -> " << after << " ms";
  const std::string report = verification_report(v);
  EXPECT_NE(report.find("first each of the 30 tables alone"), std::string::npos) << report;
  EXPECT_NE(report.find("1.80x"), std::string::npos) << report;  // a slow table named
  EXPECT_EQ(plan_to_json(task, tables)["verification"]["tables"].size(), 30u);

  // Where the model is exact, the tables correct nothing: the same plans.
  const PlanResult exact = make_verified_plan(*planner, task, model, model,
                                              {.candidates = 3, .measure_tables = true});
  const PlanResult as_is = make_verified_plan(*planner, task, model, model, {.candidates = 3});
  ASSERT_EQ(exact.verification->candidates.size(), as_is.verification->candidates.size());
  for (size_t i = 0; i < as_is.verification->candidates.size(); ++i) {
    EXPECT_NEAR(exact.verification->candidates[i].measured_ms,
                as_is.verification->candidates[i].measured_ms, 1e-9);
  }
  const std::string e = testing::error_of([&] {
    make_verified_plan(*planner, task, model, truth, {.candidates = 0, .measure_tables = true});
  });
  EXPECT_NE(e.find("measuring the tables alone needs at least 1 candidate"), std::string::npos)
      << e;
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

// A model that prices a device by the inverse of its tables' work: blind,
// so the search's plans pile the heavy tables together.
class InverseWork : public testing::WrappedCompute {
 public:
  explicit InverseWork(ComputeModel& inner) : WrappedCompute(inner, "inverse work") {}
  double compute_ms(std::span<const int> ids) const override {
    double ms = 0;
    for (int id : ids) {
      const int one[] = {id};
      ms += 1 / inner_.compute_ms(one);
    }
    return ms;
  }
};

TEST(Verification, ARivalsPlanIsMeasuredBesideTheSearchsAndChosenWhenFastest) {
  const PlanTask task = random_task(30, 4, 1.3, 11);
  ToyCostModel truth;
  testing::ToyComputeModel registry;
  const CostModel blind{std::make_shared<InverseWork>(registry), truth.model.comm, "blind", {}};
  auto planner = create_planner("neuroshard", {});
  const PlanResult alone = make_verified_plan(*planner, task, blind, truth, {.candidates = 3});
  for (const VerifiedCandidate& c : alone.verification->candidates) {
    EXPECT_EQ(c.source, "neuroshard");
  }
  const PlanResult r = make_verified_plan(*planner, task, blind, truth,
                                          {.candidates = 3, .rivals = {"lookup_greedy"}});
  const Verification& v = *r.verification;
  ASSERT_EQ(v.candidates.size(), alone.verification->candidates.size() + 1);
  const VerifiedCandidate& rival = v.candidates.back();
  EXPECT_EQ(rival.source, "lookup_greedy");
  EXPECT_EQ(rival.round, 0);
  validate_plan(task, rival.plan);
  // The blind search's plans measure slower than the heuristic's; the choice
  // is the heuristic's plan, and the report says whose it is.
  const Verification& searched = *alone.verification;
  EXPECT_LT(rival.measured_ms, searched.candidates[searched.chosen].measured_ms);
  EXPECT_EQ(v.candidates[v.chosen].source, "lookup_greedy");
  EXPECT_EQ(r.plan.shards.size(), rival.plan.shards.size());
  const std::string report = verification_report(v);
  EXPECT_NE(report.find("and lookup_greedy's"), std::string::npos) << report;
  EXPECT_NE(report.find("(lookup_greedy's plan)"), std::string::npos) << report;
  // A rival that is no planner is refused before anything is measured.
  EXPECT_THROW(make_verified_plan(*planner, task, blind, truth,
                                  {.candidates = 3, .rivals = {"tourchrec"}}),
               Error);
  EXPECT_EQ(parse_verify_rivals("none", "--x"), std::vector<std::string>{});
  EXPECT_EQ(parse_verify_rivals("torchrec,size_greedy", "--x"),
            (std::vector<std::string>{"torchrec", "size_greedy"}));
  EXPECT_THROW(parse_verify_rivals("torchrec,", "--x"), Error);
}

TEST(Verification, TraceHasATrackPerDeviceAndEndsAtTheCost) {
  const PlanTask task = testing::random_task(12, 3, 1.3, 5);
  testing::ToyCostModel model;
  const PlanResult r = make_plan(*create_planner("neuroshard", {}), task, model);
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
  ToyCostModel model(false);
  const PlanResult r = make_plan(*create_planner("neuroshard", {}), task, model);
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

namespace embshard {
namespace {

// A truth whose every measurement is off by its own chance factor (in
// [0.75, 1.25], drawn from the set and the pass), kept per set and pass as the
// measured model keeps it: the first measurement of a set in pass 0, or in a
// fresh pass.
class NoisyMeasurements : public ComputeModel {
 public:
  explicit NoisyMeasurements(uint64_t seed) : inner_(true), seed_(seed) {}
  std::string name() const override { return "noisy"; }
  int64_t batch_size() const override { return inner_.batch_size(); }
  int add_table(const TableFeatures& t) override { return inner_.add_table(t); }
  double compute_ms(std::span<const int> ids) const override {
    std::vector<int> set(ids.begin(), ids.end());
    std::sort(set.begin(), set.end());
    uint64_t h = seed_ ^ (static_cast<uint64_t>(pass_) * 0x9e3779b97f4a7c15ULL);
    for (int id : set) h = (h ^ static_cast<uint64_t>(id)) * 0x100000001b3ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    const double u = static_cast<double>(h % 1000003) / 1000003.0;
    return inner_.compute_ms(ids) * (0.75 + 0.5 * u);
  }
  void set_fresh_pass(bool fresh) override {
    pass_ = fresh ? ++passes_ : 0;
    fresh_calls += fresh ? 1 : 0;
  }
  int fresh_calls = 0;

 private:
  testing::ToyComputeModel inner_;
  uint64_t seed_;
  int pass_ = 0, passes_ = 0;
};

TEST(Verification, LeadersMeasuredAfreshKeepALuckyMeasurementFromDecidingTheChoice) {
  auto planner = create_planner("neuroshard", {});
  double lucky_sum = 0, fresh_sum = 0;
  int fresh_better = 0, fresh_worse = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const PlanTask task = random_task(30, 4, 1.3, 20 + seed);
    ToyCostModel model(true);
    // Each verification with its own truth, alike: the same first measurements.
    std::shared_ptr<NoisyMeasurements> noisy;
    const auto truth = [&] {
      noisy = std::make_shared<NoisyMeasurements>(seed);
      return CostModel{noisy, model.model.comm, "noisy", {}};
    };
    ShardCosts exact(task, model);
    const auto true_ms = [&](const PlanResult& r) {
      return predict_plan(task, r.plan, exact).cost_ms;
    };
    const PlanResult once = make_verified_plan(*planner, task, model, truth(), {.candidates = 6});
    EXPECT_EQ(noisy->fresh_calls, 0);
    const PlanResult led = make_verified_plan(
        *planner, task, model, truth(), {.candidates = 6, .leaders = 2, .fresh_passes = 4});
    EXPECT_EQ(noisy->fresh_calls, 4);
    const Verification& v = *led.verification;
    EXPECT_EQ(v.leaders, 2);
    // The leaders are the two lowest figures of the one-pass verification;
    // each measured 4 times more, and chosen among on the median.
    const auto& before = once.verification->candidates;
    ASSERT_EQ(v.candidates.size(), before.size());
    std::vector<double> figures;
    for (const VerifiedCandidate& c : before) figures.push_back(c.measured_ms);
    std::sort(figures.begin(), figures.end());
    int leaders = 0;
    for (size_t i = 0; i < v.candidates.size(); ++i) {
      const VerifiedCandidate& c = v.candidates[i];
      if (c.fresh_ms.empty()) {
        EXPECT_DOUBLE_EQ(c.measured_ms, before[i].measured_ms);
        EXPECT_NE(static_cast<int>(i), v.chosen);
        continue;
      }
      ++leaders;
      EXPECT_LE(before[i].measured_ms, figures[1]);
      ASSERT_EQ(c.fresh_ms.size(), 4u);
      std::vector<double> all = c.fresh_ms;
      all.push_back(before[i].measured_ms);
      std::sort(all.begin(), all.end());
      EXPECT_DOUBLE_EQ(c.measured_ms, all[2]);
      EXPECT_NE(c.fresh_ms[0], c.fresh_ms[1]);  // measured afresh, not cached
    }
    EXPECT_EQ(leaders, 2);
    const std::string report = verification_report(v);
    EXPECT_NE(report.find("; the 2 leading 4 times more, compute afresh"), std::string::npos)
        << report;
    EXPECT_NE(report.find(" (leader)"), std::string::npos) << report;  // the one not chosen
    lucky_sum += true_ms(once);
    fresh_sum += true_ms(led);
    fresh_better += true_ms(led) < true_ms(once) - 1e-9;
    fresh_worse += true_ms(led) > true_ms(once) + 1e-9;
  }
  // Chosen on one measurement, the choice often owes its lead to chance;
  // the leaders' medians choose plans that are faster in truth.
  EXPECT_GT(fresh_better, fresh_worse);
  EXPECT_LT(fresh_sum, lucky_sum);
  const PlanTask task = random_task(30, 4, 1.3, 11);
  ToyCostModel model(true);
  EXPECT_THROW(make_verified_plan(*planner, task, model, model,
                                  {.candidates = 3, .leaders = -1, .fresh_passes = 2}),
               Error);
}

}  // namespace
}  // namespace embshard
