#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "embshard/cost/cost_model.h"
#include "embshard/eval/ranking.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "search/toy_cost_model.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

std::string make_workload(const ScratchDir& dir, int tables) {
  return testing::write_test_workload(dir, {tables, 128, 100, 3000, 1, 3, 5, 9}).dir;
}

// Predicts a pseudo-random compute cost per shard: ranks placements blindly.
class Blind : public testing::WrappedCompute {
 public:
  explicit Blind(ComputeModel& inner) : WrappedCompute(inner, "blind") {}
  double compute_ms(std::span<const int> ids) const override {
    std::vector<int> key(ids.begin(), ids.end());
    std::sort(key.begin(), key.end());
    uint64_t h = 1469598103934665603ULL;
    for (int id : key) h = (h ^ static_cast<uint64_t>(id)) * 1099511628211ULL;
    return 1.0 + static_cast<double>(h % 1000);
  }
};

TEST(Ranking, ABlindModelPicksBadPlacements) {
  ScratchDir dir("ranking_toy");
  const Workload w = load_workload(make_workload(dir, 12));
  testing::ToyCostModel truth;
  const CostModel blind{std::make_shared<Blind>(*truth.compute), truth.model.comm, "blind", {}};
  RankingOptions o;
  o.tasks = 20;
  o.placements = 6;
  o.devices = 3;
  o.min_tables = 6;
  o.max_tables = 10;
  const RankingResult good = ranking_check(truth, truth.compute, w, o, silent_reporter());
  EXPECT_DOUBLE_EQ(good.pick_within_tolerance_rate, 1.0);
  EXPECT_DOUBLE_EQ(good.mean_regret, 0.0);
  const RankingResult bad = ranking_check(blind, truth.compute, w, o, silent_reporter());
  EXPECT_LT(bad.pick_within_tolerance_rate, 0.5);
  EXPECT_GT(bad.mean_regret, 0.01);
  for (size_t i = 0; i < bad.tasks.size(); ++i) {  // same tasks and placements: same truth
    EXPECT_EQ(bad.tasks[i].measured_ms, good.tasks[i].measured_ms);
  }
}

TEST(Ranking, MeasuredModelAgainstItselfAlwaysHits) {
  ScratchDir dir("ranking");
  const Workload w = load_workload(make_workload(dir, 12));
  CostModelOptions options;
  options.workload_dir = w.dir;
  options.reference_window_s = 0.3;
  const CostModel measured = create_cost_model("measured", options);
  RankingOptions o;
  o.tasks = 6;
  o.placements = 5;
  o.devices = 3;
  o.min_tables = 6;
  o.max_tables = 10;
  o.dims = {8, 16};
  CaptureReporter reporter;
  // The measured model against itself: the same cached costs on both sides.
  const RankingResult self = ranking_check(measured, measured.compute, w, o, reporter);
  ASSERT_FALSE(reporter.events().empty());
  EXPECT_EQ(reporter.events().back().done, static_cast<uint64_t>(o.tasks));
  EXPECT_TRUE(reporter.events().back().final);
  ASSERT_EQ(self.tasks.size(), 6u);
  EXPECT_DOUBLE_EQ(self.pick_within_tolerance_rate, 1.0);
  for (const RankingTask& t : self.tasks) {
    EXPECT_EQ(t.predicted_ms.size(), 5u);
    EXPECT_EQ(t.predicted_ms, t.measured_ms);
    EXPECT_GE(t.tables, 6);
  }
  o.placements = 1;
  EXPECT_THROW(ranking_check(measured, measured.compute, w, o, silent_reporter()), Error);
}

}  // namespace
}  // namespace embshard
