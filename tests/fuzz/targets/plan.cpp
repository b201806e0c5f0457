// Plan files (plan/plan_file.h), the one reader `embshard diff` and every
// other consumer of a plan go through; a plan read is then diffed against
// itself, as text and as JSON.
// fuzz-max-len: 32768
#include <nlohmann/json.hpp>

#include "embshard/plan/diff.h"
#include "embshard/plan/plan_file.h"
#include "fuzz/fuzz_support.h"

EMBSHARD_FUZZ_TARGET(plan, nullptr) {
  const std::string path = embshard::fuzz::write_scratch("plan.json", data, size);
  embshard::fuzz::expect_clean("load_plan_file", [&] {
    const embshard::PlanFile plan = embshard::load_plan_file(path);
    const embshard::PlanDiff diff = embshard::diff_plans(plan, plan);
    embshard::plan_diff_text(diff, true);
    embshard::plan_diff_json(diff, true).dump();
  });
}
