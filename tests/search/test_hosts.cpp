// Plans on hosts: the search and the prediction price the inter-host links,
// the report sums up each host, and the plan JSON carries the topology.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "embshard/plan/plan_file.h"
#include "embshard/plan/report.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "search/task_util.h"
#include "search/toy_cost_model.h"

namespace embshard {
namespace {

PlanTask hosts_task(double gbps) {
  PlanTask task = testing::random_task(24, 8, 1.5, 11);
  task.topology = Topology{4, gbps, 0};
  return task;
}

TEST(Hosts, PredictionTakesEachHostsLink) {
  testing::ToyCostModel model;
  PlanTask task = hosts_task(1e-3);
  const PlanResult r = plan_task(task, "size_greedy", {}, model);
  const std::vector<HostSummary> hosts = host_summaries(task, r.predicted);
  ASSERT_EQ(hosts.size(), 2u);
  for (int d = 0; d < task.num_devices(); ++d) {
    const HostSummary& h = hosts[task.topology.host_of(d)];
    EXPECT_GT(h.inter_host_bwd_ms, 0);
    EXPECT_GE(r.predicted.devices[d].bwd_comm_ms, h.inter_host_bwd_ms - 1e-9) << d;
    // The physical floor counts the link too.
    EXPECT_GE(r.predicted.devices[d].comm_floor_ms, 0);
  }
  EXPECT_EQ(hosts[1].first_device, 4);
  EXPECT_EQ(hosts[1].last_device, 7);
  // The same plan on one host costs less.
  PlanTask flat = task;
  flat.topology = Topology{};
  ShardCosts costs(flat, model);
  EXPECT_LT(predict_plan(flat, r.plan, costs).cost_ms, r.predicted.cost_ms);
  // The bound stays under the plan's cost.
  EXPECT_LE(r.bound.total_ms(), r.predicted.cost_ms + 1e-9);
}

TEST(Hosts, SearchOnHostsIsNoWorseThanTheFlatSearchOnThem) {
  testing::ToyCostModel model;
  for (double gbps : {1e-3, 1e-2}) {
    PlanTask task = hosts_task(gbps);
    PlanTask flat = task;
    flat.topology = Topology{};
    const PlanResult aware = plan_task(task, "neuroshard", {}, model);
    const PlanResult blind = plan_task(flat, "neuroshard", {}, model);
    ShardCosts costs(task, model);
    EXPECT_LE(aware.predicted.cost_ms, predict_plan(task, blind.plan, costs).cost_ms * 1.0001)
        << gbps;
  }
}

// The lower bound counts the bytes every plan puts on each host's link
// (each table's columns, or its replica's all-reduce where that is less),
// in every device's communication, the costliest piece's included: under
// every planner's plan, random placements included, on even and uneven
// hosts, with and without replicas, and tighter than the flat bound where
// the links bind.
TEST(Hosts, BoundCountsTheLinksAndStaysUnderEveryPlan) {
  testing::ToyCostModel model;
  const std::pair<int, int> layouts[] = {{8, 4}, {8, 2}, {8, 3}, {12, 4}};
  for (const auto& [devices, per_host] : layouts) {
    for (const double gbps : {1e-3, 1e-2, 1.0}) {
      for (const char* types : {"", "table_wise,column_wise"}) {
        TaskConstraints c;
        if (*types != 0) c.types = ShardingTypes::parse(types, "--sharding-types");
        PlanTask task = testing::random_task(3 * devices, devices, 1.5, devices + per_host, c);
        task.topology = Topology{per_host, gbps, 5};
        PlanTask flat = task;
        flat.topology = Topology{};
        const LowerBound one_host = plan_task(flat, "size_greedy", {}, model).bound;
        std::vector<double> dims, replicas;
        for (const TableSpec& t : task.tables) {
          dims.push_back(t.dim);
          replicas.push_back(*types == 0 ? static_cast<double>(t.weight_bytes()) : -1.0);
        }
        const double link_ms =
            host_link_floor_ms(ShardCosts(task, model).comm(), devices, dims, replicas);
        EXPECT_GT(link_ms, 0);
        for (const char* algo : {"neuroshard", "torchrec", "random", "size_greedy"}) {
          const PlanResult r = plan_task(task, algo, {}, model);
          SCOPED_TRACE(fmt::format("{} x {}, {} GB/s, types '{}', {}", devices, per_host, gbps,
                                   types, algo));
          EXPECT_LE(r.bound.total_ms(), r.predicted.cost_ms * (1 + 1e-9));
          // The costliest piece's device pays a host link too.
          EXPECT_GE(r.bound.comm_ms, link_ms);
          if (gbps < 0.1) EXPECT_GT(r.bound.mean_comm_ms, 2 * one_host.mean_comm_ms);
        }
      }
    }
  }
}

// An inference plan pays its host links forward only (its report's hosts
// too), and its bound stays under it.
TEST(Hosts, InferencePaysNoBackwardLink) {
  CostModelOptions o;
  o.forward_only = true;
  const CostModel model = create_cost_model("analytic", o);
  PlanTask task = hosts_task(1e-2);
  task.step = StepKind::kInference;
  const PlanResult r = plan_task(task, "neuroshard", {}, model);
  for (const DeviceCosts& d : r.predicted.devices) {
    EXPECT_EQ(d.bwd_comm_ms, 0);
    EXPECT_GT(d.fwd_comm_ms, 0);
  }
  for (const HostSummary& h : host_summaries(task, r.predicted)) {
    EXPECT_EQ(h.inter_host_bwd_ms, 0);
    EXPECT_GT(h.inter_host_fwd_ms, 0);
  }
  EXPECT_LE(r.bound.total_ms(), r.predicted.cost_ms * (1 + 1e-9));
}

TEST(Hosts, ReportAndJsonCarryTheHosts) {
  testing::ToyCostModel model;
  const PlanTask task = hosts_task(2.5);
  const PlanResult r = plan_task(task, "size_greedy", {}, model);
  const std::string report = plan_report(task, r, false);
  EXPECT_NE(report.find("hosts: 2 hosts of 4 devices, 2.5 GB/s between hosts"), std::string::npos)
      << report;
  EXPECT_NE(report.find("inter-host fwd ms"), std::string::npos);
  const std::string svg = plan_svg(task, r);
  EXPECT_NE(svg.find(">host 1<"), std::string::npos);
  EXPECT_NE(svg.find("hosts: 2 hosts of 4 devices"), std::string::npos);
  const nlohmann::json j = plan_to_json(task, r);
  ASSERT_TRUE(j.contains("topology"));
  EXPECT_EQ(j["topology"]["devices_per_host"], 4);
  const PlanFile back = parse_plan_file(j.dump(), "hosts.json");
  EXPECT_EQ(back.topology.devices_per_host, 4);
  EXPECT_DOUBLE_EQ(back.topology.inter_host_gbps, 2.5);
  // One host: neither.
  PlanTask flat = task;
  flat.topology = Topology{};
  const PlanResult f = plan_task(flat, "size_greedy", {}, model);
  EXPECT_EQ(plan_report(flat, f, false).find("hosts:"), std::string::npos);
  EXPECT_FALSE(plan_to_json(flat, f).contains("topology"));
  EXPECT_EQ(parse_plan_file(plan_to_json(flat, f).dump(), "flat.json").topology.devices_per_host,
            0);
}

TEST(Hosts, BadTopologyInAPlanFileIsNamed) {
  testing::ToyCostModel model;
  const PlanTask task = hosts_task(2.5);
  const PlanResult r = plan_task(task, "size_greedy", {}, model);
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"devices_per_host", 8},
                                                           {"devices_per_host", 0},
                                                           {"inter_host_gbps", 0},
                                                           {"inter_host_gbps", "fast"},
                                                           {"inter_host_latency_us", -1}}) {
    nlohmann::json j = plan_to_json(task, r);
    j["topology"][field] = value;
    try {
      parse_plan_file(j.dump(), "bad.json");
      FAIL() << field << " = " << value.dump() << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("topology." + field), std::string::npos) << e.what();
    }
  }
}

TEST(Hosts, ManyHostsShowTheSlowest) {
  testing::ToyCostModel model;
  PlanTask task = testing::random_task(200, 80, 1.5, 3);
  task.topology = Topology{2, 1.0, 0};
  const PlanResult r = plan_task(task, "size_greedy", {}, model);
  const std::string report = host_report(task, r.predicted);
  EXPECT_NE(report.find("the 16 hosts with the slowest devices of 40"), std::string::npos)
      << report;
  // The critical device's host is among them.
  const int critical_host = task.topology.host_of(r.predicted.critical_device);
  EXPECT_NE(report.find(fmt::format("\n{} ", critical_host)), std::string::npos) << report;
}

}  // namespace
}  // namespace embshard
