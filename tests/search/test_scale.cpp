// Planning many tables on many devices: the start with the pieces over the
// even share halved (split_to_share), and the lower bound's piece term, which
// counts a row block's or replica's own collectives (their latency grows
// with the devices), never above a plan's cost.
#include <gtest/gtest.h>

#include <memory>

#include "embshard/search/planner.h"
#include "search/pieces.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"

namespace embshard {
namespace {

using testing::random_task;
using testing::ToyCommModel;
using testing::ToyCostModel;

// The toy's communication, and a collective latency of `latency_ms` on every
// device each way as soon as any row piece exists (a ring reduce-scatter's
// steps over every device), as the analytic model has.
class LatencyComm : public ToyCommModel {
 public:
  explicit LatencyComm(double latency_ms) : latency_ms_(latency_ms) {}
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd,
                     std::span<double> bwd) const override {
    ToyCommModel::collective_ms(load, fwd, bwd);
    double rw = 0;
    for (double d : load.rw_dim_sums) rw += d;
    if (rw == 0) return;
    for (size_t d = 0; d < fwd.size(); ++d) fwd[d] += latency_ms_, bwd[d] += latency_ms_;
  }

 private:
  double latency_ms_;
};

// A task whose first table is much hotter than the rest together over the devices.
PlanTask hot_first(int tables, int devices, uint64_t seed, const TaskConstraints& c = {}) {
  PlanTask task = random_task(tables, devices, 1.3, seed, c);
  task.tables[0].pooling_factor = 400;
  task.tables[0].dim = 128;
  return make_task(task.tables, task.batch_size, task.device_mem_bytes, c);
}

double share_of(const std::vector<search::Piece>& pieces, int devices) {
  double s = 0;
  for (const search::Piece& p : pieces) s += p.single_ms;
  return s / devices;
}

TEST(SplitToShare, HalvesThePiecesOverTheShareAndNothingElse) {
  const PlanTask task = hot_first(40, 8, 3);
  ToyCostModel model;
  ShardCosts costs(task, model);
  const std::vector<search::Piece> start = search::initial_pieces(task, costs);
  const double share = share_of(start, task.num_devices());
  ASSERT_GT(start[0].single_ms, share) << "the hot table must be over the share";
  // The line: the share, or the costliest narrowest half of a piece over it.
  double line = share;
  for (const search::Piece& p : start) {
    if (p.single_ms <= share) continue;
    int cols = p.cols;
    while (task.split.can_halve(cols)) cols /= 2;
    line = std::max(line, costs.single_ms(costs.piece_id(p.table, cols)));
  }
  const std::vector<search::Piece> split = search::split_to_share(task, costs, start);
  std::vector<int> width(task.num_tables(), 0);
  int hot_pieces = 0;
  for (const search::Piece& p : split) {
    width[p.table] += p.cols;
    hot_pieces += p.table == 0;
    EXPECT_TRUE(p.single_ms <= line || !task.split.can_halve(p.cols)) << p.table;
    if (p.cols != task.tables[p.table].dim) {  // a half of a piece over the line
      EXPECT_GT(costs.single_ms(costs.piece_id(p.table, p.cols * 2)), line) << p.table;
    }
  }
  EXPECT_GT(hot_pieces, 1);
  for (int t = 0; t < task.num_tables(); ++t) EXPECT_EQ(width[t], task.tables[t].dim) << t;
  for (const search::Piece& p : start) {
    if (p.single_ms <= share) {
      EXPECT_EQ(std::count_if(split.begin(), split.end(),
                              [&](const search::Piece& q) { return q.table == p.table; }),
                1)
          << "a table under the share stays whole: " << p.table;
    }
  }
}

// At most so many halvings, the costliest piece first: one halving of the
// hot table, then none.
TEST(SplitToShare, HalvesAtMostAsManyAsAskedTheCostliestFirst) {
  const PlanTask task = hot_first(40, 8, 3);
  ToyCostModel model;
  ShardCosts costs(task, model);
  const std::vector<search::Piece> start = search::initial_pieces(task, costs);
  const std::vector<search::Piece> all = search::split_to_share(task, costs, start);
  ASSERT_GT(all.size(), start.size() + 1);
  EXPECT_EQ(search::split_to_share(task, costs, start, 0).size(), start.size());
  const std::vector<search::Piece> one = search::split_to_share(task, costs, start, 1);
  ASSERT_EQ(one.size(), start.size() + 1);
  EXPECT_EQ(
      std::count_if(one.begin(), one.end(), [](const search::Piece& p) { return p.table == 0; }),
      2);
}

TEST(SplitToShare, LeavesThePiecesWhereColumnsMayNotSplit) {
  TaskConstraints c;
  c.types = ShardingTypes::parse("table_wise,row_wise", "test");
  const PlanTask task = hot_first(40, 8, 3, c);
  ToyCostModel model;
  ShardCosts costs(task, model);
  const std::vector<search::Piece> start = search::initial_pieces(task, costs);
  EXPECT_EQ(search::split_to_share(task, costs, start).size(), start.size());
}

// The bound's piece term takes a row block's collectives: with a collective
// latency past the hot table's cost, no row split helps, and the bound is
// the hot table's narrowest column piece with its all-to-all; below every
// plan either way.
TEST(LowerBound, CountsTheCollectivesOfARowBlock) {
  const PlanTask task = hot_first(30, 8, 5);
  for (const double latency : {0.0, 1000.0}) {
    ToyCostModel toy;
    const CostModel model{toy.compute, std::make_shared<LatencyComm>(latency), "toy", {}};
    ShardCosts costs(task, model);
    const LowerBound b = lower_bound(task, costs);
    const double narrow = costs.single_ms(costs.piece_id(0, task.min_piece_cols(0)));
    if (latency > 0) {
      EXPECT_DOUBLE_EQ(b.piece_ms, narrow);
      EXPECT_LT(b.comm_ms, latency);
    } else {
      EXPECT_LT(b.piece_ms, narrow) << "without the latency a row block is the cheapest piece";
    }
    for (const char* algo : {"neuroshard", "torchrec", "size_greedy", "random"}) {
      for (uint64_t seed : {1, 2, 3}) {
        PlannerOptions o;
        o.seed = seed;
        o.threads = 1;
        const PlanResult r = make_plan(*create_planner(algo, o), task, model);
        EXPECT_LE(r.bound.total_ms(), r.predicted.cost_ms * (1 + 1e-9)) << algo << " " << latency;
        if (latency > 0) {
          EXPECT_GE(r.bound.total_ms(), narrow);
        }
      }
    }
  }
}

}  // namespace
}  // namespace embshard
