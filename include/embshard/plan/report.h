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
// docs/formats.md documents every field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/plan/result.h"

namespace embshard {

constexpr const char* kPlanFormat = "embshard-plan";
constexpr int kPlanVersion = 2;

// The report's `memory:` line (what the tables may use of each device, what
// was reserved, whose optimizer state counts) and, where some table is not
// fp32, its `data types:` line.
std::string memory_lines(const PlanTask& task);

// With a verification: also "measured" (the chosen plan's measured figures,
// shaped like "predicted") and "verification" (every candidate's predicted
// and measured cost, the chosen one, what measured them).
nlohmann::json plan_to_json(const PlanTask& task, const PlanResult& result);
std::string verification_report(const Verification& verification);

// The next best plan a verification's choice was made among (the leaders
// where there are any, else every candidate) and how far above the chosen
// plan it measured; with leaders also how far a leader's own measurements
// spread (the range of its figures over their median, the median over the
// leaders). Three measurements of one plan span on average 1.7 standard
// deviations of one measurement, which is about 1.8 standard deviations of
// the difference between two plans' medians of three: a lead smaller than
// the span could well be chance, a tie. Nothing when one plan was measured.
struct RunnerUp {
  int candidate = 0;
  double lead_pct = 0;
  std::optional<double> span_pct;  // none without leaders
  bool tie() const { return span_pct && lead_pct < *span_pct; }
};
std::optional<RunnerUp> runner_up(const Verification& verification);
// {"candidate", "lead_pct"} and, with leaders, "span_pct" and "tie".
nlohmann::json runner_up_json(const RunnerUp& runner_up);

// One shard as the terminal tables (plan --verbose, diff) show it: "2:64"
// (device:cols, every row), "1:64[0:626707]" (rows [0, 626707)), "0:all" (a
// replica).
std::string shard_text(int device, int cols, int64_t row_offset, int64_t rows, int64_t table_rows,
                       bool replica);
// The same without the device: "64", "64[0:626707]", "all" (a trace's
// device lane names its pieces so).
std::string piece_text(int cols, int64_t row_offset, int64_t rows, int64_t table_rows, bool replica);

// How unevenly a quantity (device totals, memory) is spread: what TorchRec's
// planner prints as its imbalance statistics.
struct Imbalance {
  double max_over_mean = 1, max_over_min = 1;
  double total_variation = 0;  // of the shares against an even spread (0: even)
  double kl_divergence = 0;    // of the shares from an even spread, in nats
};
Imbalance imbalance_of(const std::vector<double>& values);

// A plan's iteration as a Chrome / Perfetto trace (chrome://tracing,
// ui.perfetto.dev): one track per device with its fused compute, its wait for
// the last device and the transfer of the forward all-to-all, and the
// backward all-to-all, from `costs` (predicted or measured; `label` says which),
// as process 0; each compute slice lists the device's pieces of `plan`. With
// `predicted` (beside measured `costs`), the model's figures for the same plan
// are process 1, `predicted_label`, on the same time axis.
nlohmann::json iteration_trace(const PlanTask& task, const Plan& plan, const PlanPrediction& costs,
                               const std::string& label,
                               const PlanPrediction* predicted = nullptr,
                               const std::string& predicted_label = "");

// The terminal report: one row per device and the summary lines; with
// `per_table`, one row per table as well.
std::string plan_report(const PlanTask& task, const PlanResult& result, bool per_table);

// One host of a task with hosts (cost/topology.h) under a prediction: its
// devices, the slowest of them, and what crosses its link to the other hosts
// (the pooled all-to-all's bytes forward; the link's ms with the collectives').
struct HostSummary {
  int first_device = 0, last_device = 0, slowest_device = 0;
  int64_t memory_bytes = 0;
  double dim_sum = 0;
  double a2a_out_bytes = 0, a2a_in_bytes = 0;
  double inter_host_fwd_ms = 0, inter_host_bwd_ms = 0;
};
std::vector<HostSummary> host_summaries(const PlanTask& task, const PlanPrediction& p);
// The report's table by host ("" for one host); past 32 hosts, the 16 with
// the slowest devices.
std::string host_report(const PlanTask& task, const PlanPrediction& p);

// Per-device stacked cost bars (compute, fwd comm, bwd comm) and memory use.
std::string plan_svg(const PlanTask& task, const PlanResult& result);
// "sharding types: 40 table_wise, 2 row_wise, 1 data_parallel" (TorchRec's
// names, in sharding_type_names() order; the allowed set when restricted).
std::string sharding_type_summary(const PlanTask& task, const Plan& plan);

}  // namespace embshard
