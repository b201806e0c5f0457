// The learned policies without libtorch: files, errors, planning.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/search/planner.h"
#include "embshard/search/policy.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "policy/policy_test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::ScratchDir;
using testing::slurp;
using testing::spit;

using testing::error_of;

CostModel analytic() { return create_cost_model("analytic", CostModelOptions{}); }

std::vector<PlanTask> tasks_of(const std::string& pool, int devices, int count, uint64_t seed) {
  PolicyTrainOptions o = testing::quick_policy_options(PolicyKind::kDreamShard, pool, "");
  o.devices = devices;
  return draw_policy_tasks(load_workload(pool), o, count, seed);
}

class PolicyKinds : public ::testing::TestWithParam<PolicyKind> {};

TEST_P(PolicyKinds, SavedPolicyPlansTheSameAndValid) {
  ScratchDir dir("policy_roundtrip");
  const std::string pool = testing::write_policy_pool(dir, 30, 1);
  const PolicyNets nets = untrained_policy(GetParam(), 32, 16, 5);
  const std::string pdir = dir.file("policy");
  save_policy(nets, pdir);
  const PolicyNets back = load_policy(pdir);
  PlannerOptions po;
  po.policy_dir = pdir;
  auto planner = create_planner(policy_kind_name(GetParam()), po);
  const CostModel model = analytic();
  for (const PlanTask& task : tasks_of(pool, 4, 3, 7)) {
    ShardCosts costs(task, model);
    const EpisodeInput a = episode_input(nets, task, &costs), b = episode_input(back, task, &costs);
    EXPECT_EQ(run_episode(nets, task, a, &costs, {}).device_of,
              run_episode(back, task, b, &costs, {}).device_of);
    const PlanResult r = make_plan(*planner, task, model);  // validates
    EXPECT_EQ(r.plan.shards.size(), task.tables.size());
    EXPECT_EQ(r.algorithm, policy_kind_name(GetParam()));
  }
}

TEST_P(PolicyKinds, PlansOtherDeviceCountsAndPins) {
  ScratchDir dir("policy_devices");
  const std::string pool = testing::write_policy_pool(dir, 40, 2);
  const PolicyNets nets = untrained_policy(GetParam(), 32, 16, 5);
  const CostModel model = analytic();
  for (int devices : {1, 3, 8, 16}) {
    for (PlanTask task : tasks_of(pool, devices, 2, 11)) {
      task.pinned_device[0] = devices - 1;
      ShardCosts costs(task, model);
      const Episode ep = run_episode(nets, task, episode_input(nets, task, &costs), &costs, {});
      EXPECT_EQ(ep.device_of[0], devices - 1);
      validate_plan(task, table_wise_plan(task, ep.device_of));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Both, PolicyKinds,
                         ::testing::Values(PolicyKind::kDreamShard, PolicyKind::kAutoShard),
                         [](const auto& info) { return policy_kind_name(info.param); });

TEST(Policy, BadDirectoriesNameTheFile) {
  ScratchDir dir("policy_bad");
  const std::string pdir = dir.file("p");
  save_policy(untrained_policy(PolicyKind::kDreamShard, 16, 8, 1), pdir);
  const std::string manifest = pdir + "/manifest.json";
  const std::string good = slurp(manifest);

  EXPECT_NE(error_of([&] { load_policy(dir.file("none")); }).find("policy manifest missing"),
            std::string::npos);
  // A weight file missing, then corrupted.
  const std::string weights = pdir + "/cost_table.bin", bytes = slurp(weights);
  std::filesystem::remove(weights);
  std::string e = error_of([&] { load_policy(pdir); });
  EXPECT_NE(e.find("cost_table.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  std::string bad = bytes;
  bad[bad.size() / 2] ^= 0x5a;
  spit(weights, bad);
  e = error_of([&] { load_policy(pdir); });
  EXPECT_NE(e.find("cost_table.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("corrupted"), std::string::npos) << e;
  spit(weights, bytes);
  // Features of another version.
  json j = json::parse(good);
  j["features"].erase(j["features"].begin());
  spit(manifest, j.dump());
  e = error_of([&] { load_policy(pdir); });
  EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
  EXPECT_NE(e.find("features differ"), std::string::npos) << e;
  // Not JSON; another format; a missing field.
  spit(manifest, "{");
  EXPECT_NE(error_of([&] { load_policy(pdir); }).find("not valid JSON"), std::string::npos);
  j = json::parse(good);
  j["version"] = 99;
  spit(manifest, j.dump());
  EXPECT_NE(error_of([&] { load_policy(pdir); }).find("version 99"), std::string::npos);
  j = json::parse(good);
  j["networks"].erase("cost_overall");
  spit(manifest, j.dump());
  e = error_of([&] { load_policy(pdir); });
  EXPECT_NE(e.find("manifest.json: field '/networks/cost_overall' is missing"), std::string::npos)
      << e;
  spit(manifest, good);
  EXPECT_NO_THROW(load_policy(pdir));
  // A policy of the other kind.
  PlannerOptions po;
  po.policy_dir = pdir;
  e = error_of([&] { create_planner("autoshard", po); });
  EXPECT_NE(e.find("holds a dreamshard policy"), std::string::npos) << e;
}

TEST(Policy, NoRoomIsAnErrorNamingTheTable) {
  // Three equal tables, two devices with room for one and a half each: the
  // third table fits nowhere whole.
  std::vector<TableSpec> tables(3);
  for (int t = 0; t < 3; ++t) {
    tables[t].name = "big" + std::to_string(t);
    tables[t].rows = 10000;
    tables[t].dim = 16;
    tables[t].pooling_factor = 2;
    tables[t].row_reuse[0] = tables[t].lookup_reuse[0] = 1;
  }
  const int64_t each = MemoryModel{}.shard_bytes(DataType::kFp32, 10000, 16);
  const PlanTask task = make_task(tables, 2048, {each * 3 / 2, each * 3 / 2}, {});
  for (PolicyKind kind : {PolicyKind::kDreamShard, PolicyKind::kAutoShard}) {
    const PolicyNets nets = untrained_policy(kind, 16, 8, 1);
    const CostModel model = analytic();
    ShardCosts costs(task, model);
    const EpisodeInput in = episode_input(nets, task, &costs);
    const std::string e = error_of([&] { run_episode(nets, task, in, &costs, {}); });
    EXPECT_NE(e.find("no device has room for table 'big"), std::string::npos) << e;
    EpisodeOptions o;
    o.allow_overflow = true;
    EXPECT_TRUE(run_episode(nets, task, in, &costs, o).overflow);
  }
}

TEST(Policy, ShippedPoliciesLoad) {
  for (const std::string& name : policy_kind_names()) {
    const PolicyNets n = load_policy(shipped_policy_dir(parse_policy_kind(name)));
    EXPECT_EQ(policy_kind_name(n.kind), name);
    EXPECT_TRUE(n.info.contains("truth")) << name;
  }
}

}  // namespace
}  // namespace embshard
