// Training the learned policies (libtorch): the torch forward matches the
// plain inference, a short training beats the untrained policy on held-out
// tasks, and training resumes deterministically.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/eval/train_policy.h"
#include "embshard/util/error.h"
#include "policy/policy_test_util.h"

namespace embshard {
namespace {

using testing::ScratchDir;

CostModel analytic() { return create_cost_model("analytic", CostModelOptions{}); }

class TrainKinds : public ::testing::TestWithParam<PolicyKind> {};

TEST_P(TrainKinds, TorchForwardMatchesPlainInference) {
  ScratchDir dir("policy_torch_match");
  const std::string pool = testing::write_policy_pool(dir, 40, 1);
  PolicyTrainOptions o = testing::quick_policy_options(GetParam(), pool, "");
  o.devices = 8;
  PolicyNets nets = untrained_policy(GetParam(), 32, 16, 9);
  nets.target_mean[kHeadOverall] = 0.5;
  nets.target_std[kHeadOverall] = 2;
  const CostModel model = analytic();
  for (const PlanTask& task : draw_policy_tasks(load_workload(pool), o, 3, 5)) {
    ShardCosts costs(task, model);
    const EpisodeInput in = episode_input(nets, task, &costs);
    EpisodeOptions eo;
    eo.sample = eo.record = true;
    eo.seed = 4;
    const Episode ep = run_episode(nets, task, in, &costs, eo);
    const double torch_lp = torch_episode_log_prob(nets, task, in, ep);
    EXPECT_NEAR(ep.log_prob, torch_lp, 1e-3 * std::max(1.0, std::abs(torch_lp)));
    if (GetParam() == PolicyKind::kDreamShard) {
      const double plain = predict_with_cost_net(nets, in, ep.device_of, 8).overall_ms;
      EXPECT_NEAR(plain, torch_cost_net_overall_ms(nets, task, in, ep.device_of), 1e-4 * plain);
    }
  }
}

// The mean cost (analytic model) of the greedy plans of held-out tasks, from
// a pool with another seed than the training pool.
double held_out_cost(const PolicyNets& nets, const std::string& pool) {
  PolicyTrainOptions o = testing::quick_policy_options(nets.kind, pool, "");
  const CostModel model = analytic();
  double sum = 0;
  const auto tasks = draw_policy_tasks(load_workload(pool), o, 16, 1234);
  for (const PlanTask& t : tasks) sum += policy_plan_cost_ms(nets, t, model);
  return sum / tasks.size();
}

TEST_P(TrainKinds, ShortTrainingBeatsTheUntrainedPolicy) {
  ScratchDir dir("policy_train");
  const std::string pool = testing::write_policy_pool(dir, 60, 1);
  const std::string held_out = testing::write_policy_pool(dir, 60, 2);
  PolicyTrainOptions o = testing::quick_policy_options(GetParam(), pool, dir.file("out"));
  const PolicyTrainResult r = train_policy(o);
  ASSERT_EQ(r.iterations, o.iterations);
  const PolicyNets saved = load_policy(o.out_dir);
  PolicyNets untrained = untrained_policy(GetParam(), o.hidden, o.embed, o.seed);
  untrained.features = saved.features;
  untrained.prepare();
  const double trained_ms = held_out_cost(saved, held_out);
  const double untrained_ms = held_out_cost(untrained, held_out);
  RecordProperty("trained_over_untrained", std::to_string(trained_ms / untrained_ms));
  EXPECT_LT(trained_ms, 0.97 * untrained_ms)
      << "trained " << trained_ms << " ms, untrained " << untrained_ms << " ms";
}

INSTANTIATE_TEST_SUITE_P(Both, TrainKinds,
                         ::testing::Values(PolicyKind::kDreamShard, PolicyKind::kAutoShard),
                         [](const auto& info) { return policy_kind_name(info.param); });

TEST(TrainPolicy, ResumesToTheSameWeights) {
  ScratchDir dir("policy_resume");
  const std::string pool = testing::write_policy_pool(dir, 40, 1);
  PolicyTrainOptions o =
      testing::quick_policy_options(PolicyKind::kDreamShard, pool, dir.file("whole"));
  o.iterations = 3;
  o.updates = 2;
  o.cost_epochs = 5;
  train_policy(o);
  PolicyTrainOptions part = o;
  part.out_dir = dir.file("parts");
  part.iterations = 2;
  train_policy(part);
  part.iterations = 3;
  const PolicyTrainResult r = train_policy(part);
  EXPECT_EQ(r.resumed_from, 2);
  for (const char* f : {"policy_logit.bin", "policy_table.bin", "cost_table.bin"}) {
    EXPECT_EQ(file_crc32(o.out_dir + "/" + f), file_crc32(part.out_dir + "/" + f)) << f;
  }
  // Other options than the checkpoint's: an error naming the option.
  part.seed = 99;
  try {
    train_policy(part);
    FAIL() << "a checkpoint of other options was resumed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
  }
  // An edited checkpoint: a field of another type, or an index past the
  // run's devices, is named before anything reads it.
  part.seed = o.seed;
  const std::string state_path = part.out_dir + "/checkpoint/state.json";
  const nlohmann::json state = nlohmann::json::parse(testing::slurp(state_path));
  ASSERT_FALSE(state.at("samples").empty());
  for (const auto& [field, value, needle] :
       std::vector<std::tuple<const char*, nlohmann::json, std::string>>{
           {"device_of", {99}, "field '/samples/0/device_of/0' is 99, the run has 4 devices"},
           {"pool", "first", "field '/samples/0/pool' is \"first\", expected a whole number >= 0"},
           {"tables", {100000}, "field '/samples/0/tables/0' is 100000, pool 0 has 40 tables"},
           // Past an int: not wrapped around to a table that exists.
           {"tables", {(int64_t{1} << 32) + 3},
            "field '/samples/0/tables/0' is 4294967299, pool 0 has 40 tables"},
           {"pool", 7, "field '/samples/0/pool' is 7, the run has 1 pool"},
           {"dims", {0}, "field '/samples/0/dims/0' is 0, expected a dim in 1..1024"}}) {
    nlohmann::json edited = state;
    edited["samples"][0][field] = value;
    testing::spit(state_path, edited.dump());
    const std::string e = testing::error_of([&] { train_policy(part); });
    EXPECT_NE(e.find("state.json: " + needle), std::string::npos) << e;
  }
}

TEST(TrainPolicy, CliTrainsAPolicyThatPlanUses) {
  ScratchDir dir("policy_cli");
  const std::string pool = testing::write_policy_pool(dir, 30, 1);
  const std::string out = dir.file("pol");
  const auto r = testing::run_cli("train-policy --algo autoshard --pool " + pool + " -o " + out +
                                  " --tables 8-12 --iterations 2 --updates 2 --episodes 4 "
                                  "--validation-tasks 2 --truth analytic --seed 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("autoshard trained for 2 iterations"), std::string::npos) << r.output;
  const auto p = testing::run_cli("plan " + pool + " --devices 4 --algo autoshard --policy " + out +
                                  " --cost-model analytic");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("plan autoshard"), std::string::npos) << p.output;
  const auto bad = testing::run_cli("train-policy --algo alphashard --pool " + pool + " -o " + out);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("valid policies: dreamshard, autoshard"), std::string::npos)
      << bad.output;
}

TEST(TrainPolicy, BadOptionsAreErrors) {
  PolicyTrainOptions o;
  o.out_dir = "/tmp/x";
  EXPECT_THROW(train_policy(o), Error);  // no pool
  o.pool_dirs = {"/nonexistent/pool"};
  EXPECT_THROW(train_policy(o), Error);
}

}  // namespace
}  // namespace embshard
