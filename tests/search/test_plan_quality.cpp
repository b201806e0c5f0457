// A guard on plan quality: every planner plans a fixed set of tasks against
// the analytic model (and the search against the shipped neural model too),
// predict-only, and neither a plan's predicted cost nor 1 + its gap to the
// lower bound may grow more than 1% past tests/data/plan_quality.json. A
// change that makes plans better or worse on purpose rewrites the record in
// the same commit:
//   EMBSHARD_UPDATE_PLAN_QUALITY=1 ./build/test_plan_quality
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/search/planner.h"
#include "embshard/util/file.h"
#include "search/task_util.h"
#include "test_util.h"

namespace embshard {
namespace {

struct QualityCase {
  std::string name;
  int tables, devices;
  double slack;
  uint64_t seed;
};

const std::vector<QualityCase>& quality_cases() {
  static const std::vector<QualityCase> cases = {
      {"30 tables, 4 devices", 30, 4, 1.3, 101},
      {"60 tables, 8 devices", 60, 8, 1.2, 102},
      {"40 tables, 4 devices, tight", 40, 4, 1.08, 103},
  };
  return cases;
}

// Every figure of the matrix, keyed "case / planner / model".
nlohmann::json plan_quality_figures() {
  const CostModel analytic = create_cost_model("analytic", {});
  CostModelOptions neural_options;
  neural_options.batch_size = 4096;
  const CostModel neural = create_cost_model("neural", neural_options);
  nlohmann::json out = nlohmann::json::object();
  for (const QualityCase& c : quality_cases()) {
    const PlanTask task = testing::random_task(c.tables, c.devices, c.slack, c.seed);
    for (const std::string& algo : planner_names()) {
      for (const CostModel* model : {&analytic, &neural}) {
        if (model == &neural && algo != "neuroshard") continue;
        auto planner = create_planner(algo, {});
        const PlanResult r = make_plan(*planner, task, *model);
        const std::string key =
            fmt::format("{} / {} / {}", c.name, algo, model == &analytic ? "analytic" : "neural");
        out[key] = {{"cost_ms", r.predicted.cost_ms}, {"gap", r.gap()}};
      }
    }
  }
  return out;
}

TEST(PlanQuality, NoPlannerWorseThanTheRecord) {
  const std::string record_path = std::string(EMBSHARD_SOURCE_DIR) + "/tests/data/plan_quality.json";
  const nlohmann::json now = plan_quality_figures();
  if (const char* update = std::getenv("EMBSHARD_UPDATE_PLAN_QUALITY"); update && *update == '1') {
    write_file_atomic(record_path, now.dump(1) + "\n");
    GTEST_SKIP() << "rewrote " << record_path;
  }
  const nlohmann::json record = nlohmann::json::parse(testing::slurp(record_path));
  for (const auto& [key, figures] : now.items()) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(record.contains(key)) << "not in " << record_path
                                      << ": EMBSHARD_UPDATE_PLAN_QUALITY=1 rewrites it";
    const double cost = figures["cost_ms"], recorded_cost = record[key]["cost_ms"];
    const double gap = figures["gap"], recorded_gap = record[key]["gap"];
    EXPECT_LE(cost, recorded_cost * 1.01) << "the plan's predicted cost grew past the record";
    EXPECT_LE(1 + gap, (1 + recorded_gap) * 1.01) << "the gap to the bound grew past the record";
  }
  EXPECT_EQ(now.size(), record.size()) << record_path << " holds cases no longer planned";
}

}  // namespace
}  // namespace embshard
