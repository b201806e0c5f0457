#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <span>

#include "embshard/measure/shard_timer.h"
#include "embshard/cost/analytic/model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/util/error.h"
#include "embshard/workload/workload.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

Workload make_workload(const ScratchDir& dir, int tables) {
  return testing::write_test_workload(dir, {tables, 256, 1000, 5000, 2, 3, 1000, 11});
}

TableFeatures features(const TableSpec& s, int dim, int source) {
  TableFeatures f = table_features(s, dim);
  f.source_table = source;
  return f;
}

TEST(MeasuredModel, TimesShardsOnTheExecutorAndCachesThem) {
  ScratchDir dir("measured");
  const Workload w = make_workload(dir, 3);
  CostModelOptions o;
  o.workload_dir = dir.path().string();
  o.reference_window_s = 0.3;
  const CostModel model = create_cost_model("measured", o);
  EXPECT_NE(model.name.find("analytic"), std::string::npos);  // says comm is not measured
  ComputeModel* m = model.compute.get();
  EXPECT_EQ(m->batch_size(), 256);
  const int a = m->add_table(features(w.tables[2], 64, 2));
  const int b = m->add_table(features(w.tables[0], 8, -1));  // matched by rows / pooling
  const std::vector<int> ab = {a, b}, ba = {b, a};
  const double ms = m->compute_ms(ab);
  EXPECT_TRUE(std::isfinite(ms));
  EXPECT_GT(ms, 0);
  EXPECT_EQ(m->compute_ms(ab), ms);  // cached: the very same value
  EXPECT_EQ(m->compute_ms(ba), ms);  // a shard is a set
  // Same structure as timing the shard directly (same tables, dims, executor).
  ShardTimerOptions timing;
  timing.warmup = 2;
  timing.repeats = 7;
  const auto executor = create_executor("cpu");
  ShardTimer timer(w, *executor, timing);
  const double direct = timer.time({{2, 64}, {0, 8}}).total_ms;
  EXPECT_GT(ms, direct / 5);
  EXPECT_LT(ms, direct * 5);
  std::vector<double> fwd(2), bwd(2);
  model.comm->comm_ms(std::vector<double>{8, 64}, std::vector<double>{1, 0}, fwd, bwd);
  EXPECT_GT(fwd[1], bwd[1]);  // device 1 waits 1 ms for device 0
}

TEST(MeasuredModel, RefusesWhatItCannotExecute) {
  ScratchDir dir("measured_bad");
  const Workload w = make_workload(dir, 2);
  CostModelOptions o;
  EXPECT_THROW(make_measured_compute_model(o), Error);  // no workload
  o.workload_dir = dir.path().string();
  o.batch_size = 512;
  EXPECT_THROW(make_measured_compute_model(o), Error);  // traces hold batch 256
  o.batch_size = 0;
  auto m = make_measured_compute_model(o);
  TableFeatures unknown = features(w.tables[0], 8, -1);
  unknown.rows = 12345;
  EXPECT_THROW(m->add_table(unknown), Error);
  EXPECT_THROW(m->add_table(features(w.tables[0], 8, 1)), Error);  // rows disagree
  // A row piece names its rows: inside the table, or an error.
  TableFeatures piece = features(w.tables[1], 8, 1);
  piece.row_piece = true;
  piece.rows = w.tables[1].rows / 2;
  piece.source_row_offset = w.tables[1].rows / 2;
  EXPECT_NO_THROW(m->add_table(piece));
  piece.source_row_offset += 1;
  piece.rows = w.tables[1].rows;
  EXPECT_THROW(m->add_table(piece), Error);
}

// The measured model of a workload, with no probe reference window.
std::shared_ptr<MeasuredComputeModel> quick_model(const ScratchDir& dir) {
  CostModelOptions o;
  o.workload_dir = dir.path().string();
  o.reference_window_s = 0;
  return make_measured_compute_model(o);
}

// A row piece and a replica's slice are measured on their own lookups: a
// piece of half the rows runs fewer lookups than the table, and the measured
// model keeps distinct ids for the table, its pieces and its slices.
TEST(MeasuredModel, MeasuresRowPiecesAndReplicaSlices) {
  ScratchDir dir("measured_pieces");
  const Workload w = make_workload(dir, 2);
  auto m = quick_model(dir);
  const int whole = m->add_table(features(w.tables[1], 8, 1));
  TableFeatures half = features(w.tables[1], 8, 1);
  half.row_piece = true;
  half.rows = w.tables[1].rows / 2;
  const int lower = m->add_table(half);
  half.source_row_offset = w.tables[1].rows / 2;
  half.rows = w.tables[1].rows - w.tables[1].rows / 2;
  const int upper = m->add_table(half);
  TableFeatures slice = features(w.tables[1], 8, 1);
  slice.batch_slice = 1;
  slice.batch_slices = 4;
  const int quarter = m->add_table(slice);
  EXPECT_EQ((std::set<int>{whole, lower, upper, quarter}).size(), 4u);
  for (int id : {whole, lower, upper, quarter}) {
    const double ms = m->compute_ms(std::span<const int>(&id, 1));
    EXPECT_TRUE(std::isfinite(ms) && ms > 0) << id;
  }
}

// A row block that none of the batch's lookups falls in is a valid piece
// (its rows are held all the same): timed, not refused for want of indices
// (eval's verification met one: 15 rows, a small table's eight blocks
// joined into four).
TEST(ShardTimer, TimesARowBlockNoLookupFallsIn) {
  ScratchDir dir("empty_block");
  const Workload w = make_workload(dir, 1);
  ShardTimerOptions timing;
  timing.warmup = 1;
  timing.repeats = 3;
  const auto executor = create_executor("cpu");
  ShardTimer timer(w, *executor, timing);
  std::vector<bool> hit(static_cast<size_t>(w.tables[0].rows), false);
  for (int64_t i : timer.piece_trace({0, 8}).indices) hit.at(static_cast<size_t>(i)) = true;
  const auto cold = std::find(hit.begin(), hit.end(), false);
  ASSERT_NE(cold, hit.end()) << "every row is looked up";
  const ShardTable block{0, 8, cold - hit.begin(), 1};
  EXPECT_TRUE(timer.piece_trace(block).indices.empty());
  const ShardTiming t = timer.time({block, {0, 8}});
  EXPECT_TRUE(std::isfinite(t.total_ms));
  EXPECT_GT(t.total_ms, 0);
}

// A fresh pass measures each set it asks for once more; pass 0 keeps the
// first measurements.
TEST(MeasuredModel, AFreshPassMeasuresEachSetOnceMore) {
  ScratchDir dir("measured_passes");
  const Workload w = make_workload(dir, 2);
  auto m = quick_model(dir);
  const int a = m->add_table(features(w.tables[0], 8, 0));
  const int b = m->add_table(features(w.tables[1], 8, 1));
  const std::vector<int> one = {a}, both = {a, b}, swapped = {b, a};
  const double first = m->compute_ms(one);
  EXPECT_EQ(m->compute_ms(one), first);
  EXPECT_EQ(m->times_measured(one), 1);
  m->set_fresh_pass(true);
  const double again = m->compute_ms(one);
  EXPECT_EQ(m->compute_ms(one), again);
  EXPECT_EQ(m->times_measured(one), 2);
  m->compute_ms(both);
  m->compute_ms(swapped);  // the same set
  EXPECT_EQ(m->times_measured(both), 1);
  m->set_fresh_pass(false);
  EXPECT_EQ(m->compute_ms(one), first);
  m->compute_ms(both);
  EXPECT_EQ(m->times_measured(both), 2);  // its pass-0 figure, first asked for now
  m->set_fresh_pass(true);  // a new pass, not the last one again
  m->compute_ms(one);
  EXPECT_EQ(m->times_measured(one), 3);
  // The raw clock's view follows the passes of the model it views.
  const auto raw = raw_clock_view(m);
  raw->set_fresh_pass(true);
  raw->compute_ms(one);
  EXPECT_EQ(m->times_measured(one), 4);
}

}  // namespace
}  // namespace embshard
