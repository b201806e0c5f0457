// Reading a plan JSON back: what `embshard plan -o plan.json` wrote
// (plan_to_json, report.h; fields in docs/formats.md), checked field by
// field. This is the one reader of the format; `embshard diff` and anything
// else that compares or replays plans goes through it.
//
// The reader trusts nothing: every field is checked for presence, type and
// range, and an Error names the file, the field (a path such as
// `tables.t001.shards[2].placement`) and the value at fault. Beyond types it
// checks what a consumer relies on: the format and version, placements of the
// form "rank:N/cuda:M" (or "rank:N/cpu") with N a device of the plan, `ranks`
// agreeing with the placements, and shards that lie inside their table and
// cover it exactly once. It does not re-check memory capacities or
// constraints: the file's figures are reported as written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/plan/plan.h"

namespace embshard {

// One shard: a row range x a column range of a table, on one device (the
// placement's rank: one rank per device).
struct PlanFileShard {
  int64_t row_offset = 0;
  int64_t rows = 0;
  int col_offset = 0;
  int cols = 0;
  int device = 0;
};

struct PlanFileTable {
  std::string name;
  std::string sharding_type;   // TorchRec's names; see sharding_type() in plan.h
  std::string compute_kernel;  // "fused", or "dense" for data parallel
  int64_t rows = 0;
  int dim = 0;
  DataType data_type = DataType::kFp32;  // version 1 files: fp32
  int64_t memory_bytes = 0;  // the table's bytes under the plan, as written
  std::vector<int> ranks;    // one per shard; for data parallel, every replica's device
  // Empty for data parallel (the file's `shards` is null): the table is
  // replicated whole on each of `ranks`.
  std::vector<PlanFileShard> shards;

  bool replicated() const { return sharding_type == "data_parallel"; }
};

// `predicted.devices[d]`.
struct PlanFileDevice {
  int64_t memory_bytes = 0;
  double memory_fraction = 0;
  double compute_ms = 0;
  double fwd_comm_ms = 0;
  double bwd_comm_ms = 0;
  double total_ms = 0;
  int num_shards = 0;
  double dim_sum = 0;
};

struct PlanFilePrediction {
  double cost_ms = 0;
  int critical_device = 0;
  double imbalance = 0;
  double lower_bound_ms = 0;
  double gap = 0;
  double search_s = 0;
  std::vector<PlanFileDevice> devices;  // one per device
};

struct PlanFile {
  std::string path;  // where it was read from (names it in errors and reports)
  std::string algorithm;
  std::string cost_model;
  int64_t batch_size = 0;
  int num_devices = 0;
  std::vector<int64_t> device_memory_bytes;  // capacity of each device
  // The file's `memory_model`, with the tables' data types: every table's
  // memory_bytes and every device's shards are checked with it. Absent (a
  // file written before it was): not checked, and has_memory_model is false.
  bool has_memory_model = false;
  MemoryModel memory;
  StepKind step = StepKind::kTraining;  // the file's `task` (absent: training)
  Topology topology;                    // the file's `topology` (absent: one host)
  // In the file's `table_order` (the task's order); by name where a file has
  // no `table_order`.
  std::vector<PlanFileTable> tables;
  PlanFilePrediction predicted;

  int num_tables() const { return static_cast<int>(tables.size()); }
};

// Reads and checks a plan file; Error names the file, field and value at
// fault (or the file and the JSON parser's message when it is not JSON).
PlanFile load_plan_file(const std::string& path);

// The same from text already in memory; `source` names it in errors.
PlanFile parse_plan_file(const std::string& text, const std::string& source);

}  // namespace embshard
