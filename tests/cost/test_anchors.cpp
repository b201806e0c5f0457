// A measurement's scale from anchor shards (cost/anchors.h).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "embshard/cost/anchors.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/model.h"
#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;

// Anchors whose ratios put the probe at `worth` ms, each off by up to
// +-`noise` (log-uniform), the first `outliers` of them 3x off.
std::vector<Anchor> planted(double worth, double noise, int count, int outliers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> price(-3, 3), off(-noise, noise);
  std::vector<Anchor> anchors(count);
  for (int k = 0; k < count; ++k) {
    anchors[k].pool = k % 2 ? "2022" : "2021";
    anchors[k].predicted_ms = std::exp(price(rng));
    anchors[k].ratio =
        anchors[k].predicted_ms / worth * std::exp(off(rng)) * (k < outliers ? 3 : 1);
  }
  return anchors;
}

TEST(Anchors, TheFitRecoversAPlantedWorthPastAnOutlier) {
  for (const double worth : {0.5, 3.46, 20.0}) {
    const AnchorScale s = fit_anchor_scale(planted(worth, 0.03, 24, 2, 7));
    EXPECT_NEAR(s.reference_ms / worth, 1.0, 0.02) << worth;
    EXPECT_LE(s.ci_low_ms, s.reference_ms);
    EXPECT_GE(s.ci_high_ms, s.reference_ms);
    EXPECT_GT(s.spread, 0.0);
    EXPECT_LT(s.spread, 0.03);
  }
  // Without noise: exact, no spread.
  const AnchorScale exact = fit_anchor_scale(planted(2.0, 0.0, 5, 0, 1));
  EXPECT_NEAR(exact.reference_ms, 2.0, 1e-12);
  EXPECT_NEAR(exact.spread, 0.0, 1e-12);
}

TEST(Anchors, TheFitRefusesWhatItCannotUse) {
  EXPECT_THROW(fit_anchor_scale({}), Error);
  for (const double bad : {0.0, -1.0, std::nan(""), double{INFINITY}}) {
    std::vector<Anchor> a = planted(1, 0, 4, 0, 3);
    a[2].ratio = bad;
    EXPECT_THROW(fit_anchor_scale(a), Error) << bad;
    a = planted(1, 0, 4, 0, 3);
    a[1].predicted_ms = bad;
    try {
      fit_anchor_scale(a);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("pool 2022"), std::string::npos) << e.what();
    }
  }
}

json header_with(double reference_ms, const std::string& method) {
  json h = {{"probe", {{"reference", {{"reference_ms", reference_ms}, {"dispersion", 0.01}}}}}};
  if (!method.empty()) h["scale"] = {{"method", method}};
  return h;
}

TEST(Anchors, AFileScaleIsComparedWithTheModelsDataAndItsSpread) {
  // The model's data: two files 4% apart (spread: the largest of 5%, 2%
  // from their mean and their dispersions 1% and 8%).
  json files = json::array({header_with(3.0, "window"), header_with(3.12, "window")});
  files[1]["probe"]["reference"]["dispersion"] = 0.08;
  const double mean = std::sqrt(3.0 * 3.12);

  const auto within = check_file_scale(header_with(mean * 1.07, "anchors"), "f.jsonl", &files);
  ASSERT_TRUE(within.has_value());
  EXPECT_EQ(within->method, "anchors");
  EXPECT_NEAR(within->model_ms, mean, 1e-9);
  EXPECT_NEAR(within->model_spread, 0.08, 1e-9);
  EXPECT_FALSE(within->moved_past_spread);
  EXPECT_NE(within->text.find("f.jsonl: scale: anchors put the probe at"), std::string::npos)
      << within->text;
  EXPECT_NE(within->text.find("+7.0%, within their spread of 8.0%"), std::string::npos)
      << within->text;
  // Without the wide file: the floor of 5%.
  files[1]["probe"]["reference"]["dispersion"] = 0.0;
  const auto floor = check_file_scale(header_with(mean * 1.07, "anchors"), "f.jsonl", &files);
  EXPECT_NEAR(floor->model_spread, 0.05, 1e-9);
  EXPECT_TRUE(floor->moved_past_spread);

  const auto past = check_file_scale(header_with(mean * 0.8, "window"), "g.jsonl", &files);
  ASSERT_TRUE(past.has_value());
  EXPECT_TRUE(past->moved_past_spread);
  EXPECT_NE(past->text.find("-20.0%, past their spread"), std::string::npos) << past->text;
  EXPECT_NE(past->text.find("one window's scale"), std::string::npos) << past->text;

  // eval's header holds its reference at /probe_reference.
  const json eval = {{"probe_reference", {{"reference_ms", mean}}}};
  ASSERT_TRUE(check_file_scale(eval, "e.jsonl", &files).has_value());

  // Nothing to compare: a version 1 file, a model without references.
  EXPECT_FALSE(check_file_scale(json::object(), "v1.jsonl", &files).has_value());
  EXPECT_FALSE(check_file_scale(header_with(3, ""), "f.jsonl", nullptr).has_value());
  const json no_reference = json::array({json{{"probe", nullptr}}});
  EXPECT_FALSE(check_file_scale(header_with(3, ""), "f.jsonl", &no_reference).has_value());
}

AnchorOptions tiny_anchors() {
  AnchorOptions o;
  o.count = 4;
  o.batch_size = 256;
  o.max_tables = 3;
  o.mem_cap_bytes = 1 << 20;
  o.pool_tables = 6;
  o.timer.warmup = 1;
  o.timer.interleave.min_rounds = 2;
  o.timer.interleave.max_rounds = 2;
  return o;
}

// The same anchors in every run, priced alike, each measured; the scale is
// where their quotients put it.
// The shipped model, and a file's timer on a small workload.
struct Rig {
  std::string model_dir = shipped_models_dir() + "/neural";
  NeuralModel model = load_neural_model(model_dir);
  testing::ScratchDir dir{"anchors"};
  Workload file = testing::write_test_workload(dir, {2, 64, 50, 400, 1, 1, 4, 5});
  std::unique_ptr<Executor> executor = create_executor("cpu", ExecutorOptions{});
  ShardTimer timer{file, *executor, ShardTimerOptions{}};
};

TEST(Anchors, MeasuredAnchorsAreTheSameShardsInEveryRun) {
  Rig rig;
  const std::string& model_dir = rig.model_dir;
  const NeuralModel& model = rig.model;
  ShardTimer& timer = rig.timer;
  const AnchorOptions o = tiny_anchors();
  const AnchorScale a = measure_anchor_scale(timer, model, model_dir, o, silent_reporter());
  const AnchorScale b = measure_anchor_scale(timer, model, model_dir, o, silent_reporter());
  ASSERT_EQ(a.anchors.size(), 4u);
  ASSERT_EQ(b.anchors.size(), 4u);
  std::vector<Anchor> refit = a.anchors;
  for (size_t k = 0; k < a.anchors.size(); ++k) {
    EXPECT_EQ(a.anchors[k].pool, k < 2 ? "2021" : "2022");
    EXPECT_EQ(a.anchors[k].tables, b.anchors[k].tables) << k;
    EXPECT_EQ(a.anchors[k].predicted_ms, b.anchors[k].predicted_ms) << k;
    EXPECT_GT(a.anchors[k].ratio, 0.0);
    EXPECT_GT(a.anchors[k].raw_ms, 0.0);
    EXPECT_LE(a.anchors[k].weight_bytes, double(o.mem_cap_bytes));
  }
  EXPECT_EQ(fit_anchor_scale(refit).reference_ms, a.reference_ms);
  EXPECT_EQ(a.model, model_dir);
  const json j = anchor_scale_json(a, o);
  EXPECT_EQ(j["method"], "anchors");
  EXPECT_EQ(j["anchors"].size(), 4u);
  EXPECT_EQ(anchor_probe_reference(a).reference_ms, a.reference_ms);
  // Another seed: other anchors.
  AnchorOptions other = o;
  other.seed += 1;
  const AnchorScale c = measure_anchor_scale(timer, model, model_dir, other, silent_reporter());
  bool differ = false;
  for (size_t k = 0; k < c.anchors.size(); ++k)
    differ |= c.anchors[k].tables != a.anchors[k].tables;
  EXPECT_TRUE(differ);
}

TEST(Anchors, BadOptionsAreRefusedBeforeAnythingIsMeasured) {
  Rig rig;
  const std::string& model_dir = rig.model_dir;
  const NeuralModel& model = rig.model;
  ShardTimer& timer = rig.timer;
  AnchorOptions o = tiny_anchors();
  o.count = 1;
  EXPECT_THROW(measure_anchor_scale(timer, model, model_dir, o, silent_reporter()), Error);
  o = tiny_anchors();
  o.dims.clear();
  EXPECT_THROW(measure_anchor_scale(timer, model, model_dir, o, silent_reporter()), Error);
  // The timer's executor only: a probe shared across executors is refused.
  const auto other = create_executor("cpu", ExecutorOptions{});
  ShardTimer foreign(rig.file, *other, ShardTimerOptions{});
  EXPECT_THROW(foreign.share_probe(timer), Error);
}

}  // namespace
}  // namespace embshard
