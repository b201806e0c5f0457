// A plan's predictions against their physical floors: per device in the
// prediction, the report, the JSON and the picture, and the warnings that
// name devices and shards.
#include <gtest/gtest.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "embshard/plan/predict.h"
#include "embshard/plan/report.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"

namespace embshard {
namespace {

// Every table costs `ms_per_table`, fused or not.
class FixedCompute : public ComputeModel {
 public:
  explicit FixedCompute(double ms_per_table) : ms_(ms_per_table) {}
  std::string name() const override { return "fixed"; }
  int64_t batch_size() const override { return 4096; }
  int add_table(const TableFeatures&) override { return tables_++; }
  double compute_ms(std::span<const int> ids) const override { return ms_ * ids.size(); }

 private:
  double ms_;
  int tables_ = 0;
};

CostModel fixed_model(double ms_per_table, double memory_gbps, double link_gbps) {
  CostModel m{std::make_shared<FixedCompute>(ms_per_table),
              std::make_shared<testing::ToyCommModel>(),
              "fixed",
              {}};
  m.source.bandwidths = {memory_gbps, "a test's memory", link_gbps, "a test's link"};
  return m;
}

// Six tables on two devices, whole, in turn.
struct Rig {
  PlanTask task = testing::random_task(6, 2, 2.0, 41);
  Plan plan;
  Rig() {
    for (int t = 0; t < task.num_tables(); ++t) {
      plan.shards.push_back({t, 0, task.tables[t].dim, 0, task.tables[t].rows, t % 2, false});
    }
  }
  PlanResult result(const CostModel& model) {
    ShardCosts costs(task, model);
    PlanResult r;
    r.plan = plan;
    r.model_source = model.source;
    r.predicted = predict_plan(task, plan, costs);
    r.floor_warnings = floor_warnings(task, plan, r.predicted, costs);
    return r;
  }
};

TEST(FloorCheck, EachDevicesFloorIsItsShardsBytesAndItsAllToAllsOverTheBandwidths) {
  Rig rig;
  const PlanResult r = rig.result(fixed_model(1.0, 20, 5));
  for (int d = 0; d < 2; ++d) {
    double bytes = 0, dims = 0;
    for (const Shard& s : rig.plan.shards) {
      if (s.device != d) continue;
      bytes += fused_work_bytes(shard_features(rig.task, s), 4096, DataType::kFp32, 4).total();
      dims += s.cols;
    }
    const DeviceCosts& c = r.predicted.devices[d];
    EXPECT_GT(c.compute_floor_ms, 0);
    EXPECT_NEAR(c.compute_floor_ms, bytes / 20e6, 1e-12);
    EXPECT_NEAR(
        c.comm_floor_ms,
        2 *
            alltoall_floor_bytes(
                dims, r.predicted.devices[0].dim_sum + r.predicted.devices[1].dim_sum, 2, 4096) /
            5e6,
        1e-12);
  }
}

TEST(FloorCheck, PredictionsUnderTheirFloorsAreNamedByDeviceAndShard) {
  Rig rig;
  const PlanResult r = rig.result(fixed_model(1e-9, 20, 0));
  ASSERT_GE(r.floor_warnings.size(), 3u);
  EXPECT_NE(r.floor_warnings[0].find("device 0: predicted compute"), std::string::npos);
  EXPECT_NE(r.floor_warnings[0].find("under its physical floor"), std::string::npos);
  EXPECT_NE(r.floor_warnings.back().find("6 shards predicted alone under their physical floors"),
            std::string::npos)
      << r.floor_warnings.back();
  EXPECT_NE(r.floor_warnings.back().find("'t"), std::string::npos);
  EXPECT_NE(r.floor_warnings.back().find("and 3 more"), std::string::npos);
}

TEST(FloorCheck, PredictionsFarOverTheirFloorsAreCountedAndTheFarthestNamed) {
  Rig rig;
  const PlanResult r = rig.result(fixed_model(1e4, 20, 0));
  ASSERT_EQ(r.floor_warnings.size(), 2u);
  EXPECT_NE(r.floor_warnings[0].find("2 of 2 devices predicted over 10x"), std::string::npos)
      << r.floor_warnings[0];
  EXPECT_NE(r.floor_warnings[1].find("6 shards predicted alone over 10x their physical floors"),
            std::string::npos)
      << r.floor_warnings[1];
}

TEST(FloorCheck, AllToAllsUnderTheirFloorAreNamed) {
  Rig rig;
  // The toy all-to-all takes about 0.04 ms here; a link of 1 MB/s cannot.
  const PlanResult r = rig.result(fixed_model(1.0, 0, 1e-3));
  ASSERT_FALSE(r.floor_warnings.empty());
  EXPECT_NE(r.floor_warnings[0].find("device 0: predicted all-to-alls"), std::string::npos)
      << r.floor_warnings[0];
}

TEST(FloorCheck, WithoutBandwidthsThereAreNoFloorsAndTheReportSaysSo) {
  Rig rig;
  const PlanResult none = rig.result(fixed_model(1e-9, 0, 0));
  EXPECT_TRUE(none.floor_warnings.empty());
  EXPECT_EQ(none.predicted.devices[0].compute_floor_ms, 0);
  EXPECT_NE(plan_report(rig.task, none, false).find("physical floors: none"), std::string::npos);
  EXPECT_EQ(plan_svg(rig.task, none).find("physical floor"), std::string::npos);

  const PlanResult under = rig.result(fixed_model(1e-9, 20, 5));
  const std::string report = plan_report(rig.task, under, false);
  EXPECT_NE(report.find("physical floors: memory 20.0 GB/s (a test's memory)"), std::string::npos);
  EXPECT_NE(report.find("warning: device 0: predicted compute"), std::string::npos);
  const nlohmann::json j = plan_to_json(rig.task, under);
  EXPECT_GT(j["predicted"]["devices"][0]["compute_floor_ms"].get<double>(), 0);
  EXPECT_EQ(j["predicted"]["floor_warnings"].size(), under.floor_warnings.size());
  EXPECT_EQ(j["cost_model_source"]["memory_gbps"].get<double>(), 20);
  // The picture marks each device's floor on its bar, and says so in the legend.
  const std::string svg = plan_svg(rig.task, under);
  EXPECT_NE(svg.find("device 1 physical floor: "), std::string::npos);
  EXPECT_NE(svg.find(">physical floor</text>"), std::string::npos);
}

}  // namespace
}  // namespace embshard
