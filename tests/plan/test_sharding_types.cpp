// Row-wise, table-row-wise, grid and data-parallel pieces in the plan model:
// the --sharding-types list, row blocks, lookup shares, the validator, the
// collectives' formulas, what predict_plan charges for the new pieces and the
// features a piece gets from the trace.
#include <gtest/gtest.h>

#include <cmath>

#include "embshard/cost/analytic/terms.h"
#include "embshard/plan/predict.h"
#include "embshard/util/error.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/trace_shard.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"
#include "test_util.h"

namespace embshard {
namespace {

using testing::error_of;

TEST(ShardingTypes, ParsesNamesAndRejectsUnknownOnesByName) {
  const ShardingTypes t = ShardingTypes::parse("table_wise,row_wise", "--sharding-types");
  EXPECT_TRUE(t.allows(ShardingType::kTableWise));
  EXPECT_TRUE(t.allows(ShardingType::kRowWise));
  EXPECT_FALSE(t.allows(ShardingType::kColumnWise));
  EXPECT_FALSE(t.allows(ShardingType::kDataParallel));
  EXPECT_EQ(t.str(), "table_wise,row_wise");
  // Spaces around a name, as "table_wise, row_wise" quoted in a shell gives them.
  EXPECT_EQ(ShardingTypes::parse(" table_wise,  row_wise ", "--sharding-types").str(),
            "table_wise,row_wise");
  EXPECT_NE(error_of([] { ShardingTypes::parse("table_wise, ", "--sharding-types"); })
                .find("unknown sharding type ''"),
            std::string::npos);
  EXPECT_EQ(ShardingTypes::all().str(),
            "table_wise,column_wise,row_wise,table_row_wise,data_parallel,grid_shard");
  const std::string e = error_of([] { ShardingTypes::parse("table_wise,rows", "--sharding-types"); });
  EXPECT_NE(e.find("--sharding-types table_wise,rows: unknown sharding type 'rows'"), std::string::npos) << e;
  EXPECT_NE(e.find("valid types: table_wise, column_wise"), std::string::npos) << e;
  EXPECT_NE(error_of([] { ShardingTypes::parse("row_wise", "--sharding-types"); })
                .find("table_wise must be allowed"),
            std::string::npos);
}

TEST(RowBlocks, TorchRecContiguousBlocksAndEmptyBlocksRejected) {
  TableSpec t;
  t.name = "big";
  t.rows = 10;
  EXPECT_EQ(row_block_sizes(t, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(row_block_sizes(t, 2), (std::vector<int64_t>{5, 5}));
  t.rows = 9;  // ceil(9/5) = 2: 2+2+2+2 = 8, the fifth block 1
  EXPECT_EQ(row_block_sizes(t, 5), (std::vector<int64_t>{2, 2, 2, 2, 1}));
  t.rows = 10;  // ceil(10/6) = 2: five blocks hold all 10, the sixth is empty
  const std::string e = error_of([&] { row_block_sizes(t, 6); });
  EXPECT_NE(e.find("table 'big': 10 rows split into 6 blocks of 2 rows leaves the last block empty"),
            std::string::npos)
      << e;
}

PlanTask task_of(int devices, int64_t cap, ShardingTypes types = {}) {
  std::vector<TableSpec> tables = testing::random_tables(4, 7);
  tables[0].rows = 1000;
  tables[0].dim = 16;
  tables[0].pooling_factor = 10;
  TaskConstraints c;
  c.types = types;
  return make_task(tables, 1024, std::vector<int64_t>(devices, cap), c);
}

TEST(LookupShare, EvenWithoutTraceAndCountedWithOne) {
  PlanTask task = task_of(2, int64_t{1} << 30);
  EXPECT_DOUBLE_EQ(task.lookup_share(0, 0, 250), 0.25);
  EXPECT_DOUBLE_EQ(task.lookup_share(0, 0, 1000), 1.0);
  // Half the lookups on row 3, the rest on rows 500, 600 and 999 of 1000.
  testing::ScratchDir dir("lookup_share");
  const std::string path = dir.file("trace.bin");
  TableTrace trace;
  trace.offsets = {0, 6};
  trace.indices = {3, 3, 3, 500, 600, 999};
  {
    TraceWriter writer(path, 1, 1, 4);
    writer.add_table(trace);
    writer.finish();
  }
  task.source_table = {0, -1, -1, -1};
  task.piece_stats = std::make_shared<PieceStats>(path);
  EXPECT_DOUBLE_EQ(task.lookup_share(0, 0, 250), 0.5);
  EXPECT_DOUBLE_EQ(task.lookup_share(0, 0, 501), 4.0 / 6);
  EXPECT_DOUBLE_EQ(task.lookup_share(0, 4, 496), 0.0);
  EXPECT_DOUBLE_EQ(task.lookup_share(0, 500, 500), 0.5);
  const int64_t rows1 = task.tables[1].rows;  // no source: the share of the rows
  EXPECT_DOUBLE_EQ(task.lookup_share(1, 0, rows1 / 2), static_cast<double>(rows1 / 2) / rows1);
}

Plan row_wise_plan(const PlanTask& task, int t, int k) {
  Plan p;
  for (int u = 0; u < task.num_tables(); ++u) {
    if (u != t) {
      p.shards.push_back({u, 0, task.tables[u].dim, 0, task.tables[u].rows, u % task.num_devices(), false});
      continue;
    }
    const std::vector<int64_t> sizes = row_block_sizes(task.tables[t], k);
    int64_t offset = 0;
    for (int b = 0; b < k; ++b) {
      p.shards.push_back({t, 0, task.tables[t].dim, offset, sizes[b], b, false});
      offset += sizes[b];
    }
  }
  return p;
}

TEST(Validator, NamesRowSplitTypesAndRejectsExcludedOnes) {
  const PlanTask all = task_of(4, int64_t{1} << 30);
  EXPECT_EQ(sharding_type(all, row_wise_plan(all, 0, 4), 0), "row_wise");
  EXPECT_EQ(sharding_type(all, row_wise_plan(all, 0, 2), 0), "table_row_wise");
  EXPECT_NO_THROW(validate_plan(all, row_wise_plan(all, 0, 4)));
  const PlanTask twcw = task_of(4, int64_t{1} << 30,
                                ShardingTypes::parse("table_wise,column_wise", "--sharding-types"));
  const std::string e = error_of([&] { validate_plan(twcw, row_wise_plan(twcw, 0, 4)); });
  EXPECT_NE(e.find("table 't0' is row_wise, which the allowed sharding types "
                   "(table_wise,column_wise) exclude"),
            std::string::npos)
      << e;
  // A row range lost: the cover check names the table.
  Plan lost = row_wise_plan(all, 0, 4);
  lost.shards[1].rows -= 1;
  EXPECT_NE(error_of([&] { validate_plan(all, lost); }).find("table 't0': its shards cover"),
            std::string::npos);
  // A no-split table asked to be row-split.
  PlanTask pinned = all;
  pinned.no_split[0] = 1;
  EXPECT_NE(error_of([&] { validate_plan(pinned, row_wise_plan(pinned, 0, 4)); })
                .find("table 't0' may not be split"),
            std::string::npos);
}

TEST(Task, TableLargerThanADeviceOnlyPlannableByRows) {
  std::vector<TableSpec> tables = testing::random_tables(3, 3);
  tables[0].name = "huge";
  tables[0].rows = 2'000'000;
  tables[0].dim = 4;  // no column split can help: 4 is the narrowest width
  for (int t = 1; t < 3; ++t) tables[t].rows = 1000;
  const int64_t cap =
      MemoryModel{}.shard_bytes(DataType::kFp32, tables[0].rows, 4) / 3;  // needs 4 row blocks
  TaskConstraints twcw;
  twcw.types = ShardingTypes::parse("table_wise,column_wise", "--sharding-types");
  const std::string e =
      error_of([&] { make_task(tables, 1024, std::vector<int64_t>(4, cap), twcw); });
  EXPECT_NE(e.find("table 'huge'"), std::string::npos) << e;
  EXPECT_NE(e.find("row_wise is not among the allowed sharding types"), std::string::npos) << e;
  EXPECT_NO_THROW(make_task(tables, 1024, std::vector<int64_t>(4, cap), {}));
}

CollectiveLoad load_of(std::vector<double> rw, std::vector<double> recv, std::vector<double> send,
                       double allreduce) {
  CollectiveLoad l;
  l.rw_dim_sums = std::move(rw);
  l.index_recv_bytes = std::move(recv);
  l.index_send_bytes = std::move(send);
  l.allreduce_bytes = allreduce;
  return l;
}

TEST(Collectives, AnalyticTermsMatchTheRingFormulas) {
  Calibration c;
  c.comm_latency_us = 10;  // alpha = 0.01 ms
  c.comm_gbps = 1;         // 1e-6 ms per byte
  const int64_t batch = 1000;
  // 4 devices; device 0 holds 16 row-piece columns, device 1 holds 8.
  const CollectiveLoad l = load_of({16, 8, 0, 0}, {3000, 0, 0, 0}, {0, 1000, 1000, 1000}, 4e6);
  std::vector<double> fwd(4, 0.0), bwd(4, 0.0);
  analytic_collective_ms(c, batch, l, fwd, bwd);
  const double alpha = 0.01, beta = 1e-6;
  // Reduce-scatter: device 0 sends 3 slices of 250 rows x 16 cols x 4 bytes = 48000;
  // receives 250 x 8 x 4 = 8000. Device 2: sends 0, receives 250 x 24 x 4 = 24000.
  const double rs0 = 3 * alpha + 48000 * beta, rs2 = 3 * alpha + 24000 * beta;
  const double index0 = alpha + 3000 * beta, index2 = alpha + 1000 * beta;
  const double allreduce = 2 * 3 * alpha + 2.0 * 3 / 4 * 4e6 * beta;
  EXPECT_NEAR(fwd[0], index0 + rs0, 1e-12);
  EXPECT_NEAR(bwd[0], rs0 + allreduce, 1e-12);
  EXPECT_NEAR(fwd[2], index2 + rs2, 1e-12);
  EXPECT_NEAR(bwd[2], rs2 + allreduce, 1e-12);
  // Nothing to exchange on one device, and no load costs nothing.
  std::vector<double> one_f(1, 0.0), one_b(1, 0.0);
  analytic_collective_ms(c, batch, load_of({8}, {1}, {1}, 1e6), one_f, one_b);
  EXPECT_EQ(one_f[0], 0.0);
  EXPECT_EQ(one_b[0], 0.0);
  std::vector<double> zf(4, 0.0), zb(4, 0.0);
  analytic_collective_ms(c, batch, load_of({0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, 0), zf, zb);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(zf[d] + zb[d], 0.0);
}

TEST(Predict, RowPiecesAndReplicasChargeTheirCollectivesNotTheAllToAll) {
  const PlanTask task = task_of(4, int64_t{1} << 30);
  testing::ToyCostModel model;
  ShardCosts costs(task, model);
  const Plan rw = row_wise_plan(task, 0, 4);
  const PlanPrediction p = predict_plan(task, rw, costs);
  // Table 0 (dim 16, pooling 10, 1000 rows) over 4 devices: 250 rows each,
  // a quarter of the 1024 x 10 lookups, 8 bytes each.
  const double lookups = 1024.0 * 10 / 4;
  for (int d = 0; d < 4; ++d) {
    EXPECT_DOUBLE_EQ(p.collectives.rw_dim_sums[d], 16.0);
    EXPECT_DOUBLE_EQ(p.collectives.index_recv_bytes[d], lookups * 8 * 3 / 4);
    EXPECT_DOUBLE_EQ(p.collectives.index_send_bytes[d], 3 * lookups * 8 / 4);
  }
  // The other tables are table-wise on devices 1, 2, 3: only they count in the all-to-all.
  EXPECT_DOUBLE_EQ(p.devices[0].dim_sum, 0.0);
  EXPECT_DOUBLE_EQ(p.devices[1].dim_sum, task.tables[1].dim);
  // The toy comm adds 2e-4 ms per row-piece column each way and 1e-7 ms per index byte.
  const double rs = 2e-4 * 16;
  EXPECT_NEAR(p.devices[0].bwd_comm_ms, 0.02 + rs, 1e-12);
  // A row piece's compute is its own table: a quarter of the pooling factor.
  const TableFeatures f = shard_features(task, rw.shards[0]);
  EXPECT_EQ(f.rows, 250);
  EXPECT_DOUBLE_EQ(f.pooling_factor, 2.5);

  Plan dp;
  for (int d = 0; d < 4; ++d) dp.shards.push_back({0, 0, 16, 0, 1000, d, true});
  for (int u = 1; u < 4; ++u) dp.shards.push_back({u, 0, task.tables[u].dim, 0, task.tables[u].rows, u, false});
  EXPECT_NO_THROW(validate_plan(task, dp));
  EXPECT_EQ(sharding_type(task, dp, 0), "data_parallel");
  const PlanPrediction q = predict_plan(task, dp, costs);
  EXPECT_DOUBLE_EQ(q.collectives.allreduce_bytes, 1000.0 * 16 * 4);  // once, not per copy
  EXPECT_DOUBLE_EQ(q.devices[0].dim_sum, 0.0);
  EXPECT_NEAR(q.devices[0].bwd_comm_ms, 0.02 + 1e-7 * 64000, 1e-12);
  // A replica that does not fit every device: an error naming the table.
  PlanTask small = task;
  small.device_mem_bytes[3] = task.table_bytes(0) - 1;
  EXPECT_NE(error_of([&] { validate_plan(small, dp); })
                .find("data-parallel table 't0' needs"),
            std::string::npos)
      << error_of([&] { validate_plan(small, dp); });
  const TableFeatures r = shard_features(task, dp.shards[2]);
  EXPECT_DOUBLE_EQ(r.pooling_factor, 2.5);  // its device's quarter of the batch
  EXPECT_EQ(r.batch_slice, 2);
  EXPECT_EQ(r.batch_slices, 4);
}

// A row block of a table whose hot rows sit in its first block, and a
// replica: with the trace, their features are those of their own lookups
// (what bench compute records); without, the table's histograms.
TEST(Predict, PiecesFromTheTraceCarryTheirOwnLookups) {
  testing::ScratchDir dir("piece_features");
  const std::string path = dir.file("trace.bin");
  PlanTask task = task_of(4, int64_t{1} << 30);
  TableTrace trace;
  trace.offsets.push_back(0);
  std::mt19937_64 rng(5);
  for (int64_t b = 0; b < task.batch_size; ++b) {
    for (int i = 0; i < 10; ++i) {
      trace.indices.push_back(static_cast<int64_t>(i % 2 == 0 ? rng() % 10 : rng() % 1000));
    }
    trace.offsets.push_back(static_cast<int64_t>(trace.indices.size()));
  }
  {
    TraceWriter writer(path, 1, task.batch_size, 4);
    writer.add_table(trace);
    writer.finish();
  }
  TableSpec& spec = task.tables[0];
  fill_table_spec(compute_table_stats(trace, spec.rows), spec);
  const Shard block{0, 0, spec.dim, 0, 250, 1, false}, cold{0, 0, spec.dim, 750, 250, 2, false};
  const Shard replica{0, 0, spec.dim, 0, spec.rows, 3, true};
  // Without the trace: the table's histograms.
  EXPECT_EQ(shard_features(task, block).row_reuse, spec.row_reuse);
  task.source_table = {0, -1, -1, -1};
  task.piece_stats = std::make_shared<PieceStats>(path);
  for (const Shard& s : {block, cold}) {
    TableSpec want = spec;
    fill_table_spec(compute_table_stats(row_shard_trace(trace, s.row_offset, s.rows), s.rows), want);
    const TableFeatures f = shard_features(task, s);
    EXPECT_EQ(f.rows, 250);
    EXPECT_EQ(f.pooling_factor, want.pooling_factor);
    EXPECT_EQ(f.row_reuse, want.row_reuse);
    EXPECT_EQ(f.lookup_reuse, want.lookup_reuse);
    EXPECT_EQ(f.source_table, 0);
    EXPECT_EQ(f.source_row_offset, s.row_offset);
    EXPECT_TRUE(f.row_piece);
  }
  EXPECT_NE(shard_features(task, block).row_reuse, shard_features(task, cold).row_reuse);
  TableSpec slice = spec;
  fill_table_spec(compute_table_stats(batch_slice_trace(trace, 3, 4), spec.rows), slice);
  const TableFeatures r = shard_features(task, replica);
  EXPECT_EQ(r.pooling_factor, slice.pooling_factor);
  EXPECT_EQ(r.lookup_reuse, slice.lookup_reuse);
  EXPECT_EQ(r.batch_slice, 3);
  // Whole tables keep the spec's features; tables with no source, too.
  EXPECT_EQ(shard_features(task, {0, 0, spec.dim, 0, spec.rows, 0, false}).row_reuse, spec.row_reuse);
  EXPECT_EQ(shard_features(task, {1, 0, 8, 0, task.tables[1].rows / 2, 0, false}).row_reuse,
            task.tables[1].row_reuse);
}

}  // namespace
}  // namespace embshard
