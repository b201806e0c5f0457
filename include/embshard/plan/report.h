// A plan for people and for TorchRec: the plan JSON (TorchRec's serialized
// ShardingPlan shape plus embshard's predictions), the per-device terminal
// table, and an SVG picture.
//
// JSON: {"format": "embshard-plan", "version": 1, "algorithm", "cost_model",
//   "batch_size", "num_devices", "device_memory_bytes": [..],
//   "tables": {NAME: {"sharding_type", "compute_kernel", "ranks": [..],
//       "shards": [{"shard_offsets": [row, col], "shard_sizes": [rows, cols],
//                   "placement": "rank:N/cuda:N"}],   (null if data_parallel)
//       "rows", "dim", "memory_bytes"}},
//   "predicted": {"cost_ms", "critical_device", "imbalance", "lower_bound_ms",
//       "gap", "search_s", "devices": [{"memory_bytes", "memory_fraction",
//       "compute_ms", "fwd_comm_ms", "bwd_comm_ms", "total_ms", "num_shards",
//       "dim_sum"}]}}
// docs/plan.md documents every field.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "embshard/plan/result.h"

namespace embshard {

constexpr const char* kPlanFormat = "embshard-plan";
constexpr int kPlanVersion = 1;

nlohmann::json plan_to_json(const PlanTask& task, const PlanResult& result);

// The terminal report: one row per device and the summary lines; with
// `per_table`, one row per table as well.
std::string plan_report(const PlanTask& task, const PlanResult& result, bool per_table);

// Per-device stacked cost bars (compute, fwd comm, bwd comm) and memory use.
std::string plan_svg(const PlanTask& task, const PlanResult& result);

}  // namespace embshard
