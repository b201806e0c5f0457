// A neural model against measured data: the predicted-vs-measured
// comparisons `embshard train` reports on its held-out splits and `embshard
// validate` on any `bench compute` or `bench comm` file.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/accuracy_report.h"
#include "embshard/cost/anchors.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/cost/topology.h"

namespace embshard {

class Reporter;

// The model's compute predictions of the given records of `data`.
Comparison compute_comparison(const NeuralModel& model, const ComputeData& data,
                              const std::vector<int>& records, std::string name,
                              std::string title);
// `all`, the comparison of `records` of `data` (in that order), broken down
// without plots:
// - by sharding type where any record holds a piece (bench compute
//   --pieces): the records of whole tables only, those holding a row block,
//   those holding a replica slice (a record with both is in both), named
//   `all.name` + "_whole_tables" / "_row_blocks" / "_replica_slices", titled
//   "- of which, whole tables only" and so on;
// - by data type where any record holds a table not fp32: "_fp32_only",
//   "_with_fp16", "_with_bf16" (a record with both is in both).
// Empty when every record holds whole fp32 tables.
std::vector<Comparison> breakdown_comparisons(const ComputeData& data,
                                              const std::vector<int>& records,
                                              const Comparison& all);
// Comm predictions of every device of the given (file, record) items, one
// comparison per direction ("comm_fwd" + suffix, "comm_bwd" + suffix); with
// `slowest`, also each record's slowest device ("comm_fwd_slowest" + suffix,
// ...: what a plan's cost takes). The predictions are on `hosts`
// (add_host_level; default one host).
void comm_comparisons(const NeuralModel& model, const std::vector<CommData>& files,
                      const std::vector<std::pair<int, int>>& items, const std::string& suffix,
                      const std::string& title_suffix, std::vector<Comparison>& out,
                      const Topology& hosts = {}, bool slowest = false);

// A compute record the model misses by much: where to look first.
struct MissedRecord {
  int64_t line = 0;   // in the data file (the header is line 1)
  size_t tables = 0;  // in the shard
  double measured_ms = 0, predicted_ms = 0, ape_pct = 0;
};
constexpr size_t kMissedRecords = 5;

// A compute file's records against their physical floors (cost/floor.h) at
// the model set's memory bandwidth: how far over them the measurements and
// the predictions sit, and the records whose prediction is under its floor
// or more than kFarOverFloor over it.
struct FloorRecord {
  int64_t line = 0;
  size_t tables = 0;
  double floor_ms = 0, measured_ms = 0, predicted_ms = 0;
};
struct FloorFigures {
  double memory_gbps = 0;
  std::string memory_source;
  std::vector<double> measured_over, predicted_over;  // per record: ms / floor
  size_t measured_under = 0, measured_far_over = 0;
  // Predictions under their floor, and far over it: every one counted, the
  // kMissedRecords farthest kept, farthest first.
  size_t under_count = 0, far_over_count = 0;
  std::vector<FloorRecord> under, far_over;
};

struct FileValidation {
  CostDataKind kind = CostDataKind::kCompute;
  std::vector<Comparison> comparisons;  // compute: one; comm: forward, backward
  // compute: the kMissedRecords records of the largest error, largest first
  std::vector<MissedRecord> most_missed;
  // compute: the same figures broken down by sharding type and data type
  // (breakdown_comparisons); empty for a file of whole fp32 tables only.
  std::vector<Comparison> breakdown;
  size_t skipped_bad_records = 0;
  // compute: the file's scale against the model's data (noted when it moved
  // past their spread); empty where either has no probe reference.
  std::optional<ScaleCheck> scale;
  // compute, where the model set gives a memory bandwidth
  std::optional<FloorFigures> floors;
  // accuracy() figures: compute's, or both comm directions pooled at the top
  // level and each under "fwd" / "bwd"; plus kind, model, data, skipped and
  // (compute) "most_missed" and "breakdown" (name -> figures).
  nlohmann::json figures;
};
// Every record of a `bench compute` or `bench comm` file (told apart by its
// header) against the model. Error when the file's batch is not the model's
// or a comm file meets a model without communication networks.
// `raw`: judge against the records' raw medians (LoadOptions::raw).
// A comm file's ranks are predicted on `hosts` (bench comm measured under
// scripts/emulated_hosts.sh); Error where a compute file is given hosts.
FileValidation validate_on_file(const NeuralModel& model, const std::string& model_dir,
                                const std::string& path, Reporter& reporter, bool raw = false,
                                const Topology& hosts = {});

}  // namespace embshard
