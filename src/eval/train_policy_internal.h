// What the policy trainer's torch and plain parts share (src/eval only).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "embshard/eval/train_policy.h"

namespace embshard::policy_train {

// A drawn task: pool tables at dims, mem_cap_bytes = each device's memory.
std::vector<EvalTask> draw_specs(const Workload& pool, const PolicyTrainOptions& o, int count,
                                 uint64_t seed);
PlanTask task_of(const Workload& pool, const EvalTask& spec, int devices);

// Mean and 1/std of every feature over the tasks' tables.
Normaliser fit_feature_normaliser(const std::vector<PlanTask>& tasks);

// One "real" plan: where the tables went and what `truth` says it costs.
struct CostSample {
  int pool = 0;
  EvalTask spec;
  std::vector<int> device_of;
  std::vector<double> device_ms;  // [devices x 3]: compute, fwd comm, bwd comm
  double plan_ms = 0;
};
CostSample measure_sample(int pool, const EvalTask& spec, const PlanTask& task,
                          const std::vector<int>& device_of, const CostModel& truth);
nlohmann::json sample_json(const CostSample& s);
// Sample `i` of a checkpoint's state (`path`): Error naming the field when
// one is of another type or indexes past the run's pools, tables or devices.
CostSample sample_from(const nlohmann::json& state, size_t i, const std::string& path,
                       const std::vector<Workload>& pools, int devices);

// Per-device totals of a placement under `truth`.
PlanPrediction truth_prediction(const PlanTask& task, const std::vector<int>& device_of,
                                const CostModel& truth);

}  // namespace embshard::policy_train
