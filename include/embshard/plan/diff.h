// Comparing two plans of the same tables (`embshard diff A.json B.json`):
// two planners, a plan before and after a constraint, two cost models.
//
// Per device: each side's predicted memory, compute, fwd/bwd comm and total,
// and B - A. Per table: each side's sharding type and placement, and whether
// it changed (type, cut, devices) with the bytes that would move. Overall:
// each plan's predicted cost and their ratio B / A. The figures are the
// files' own predictions, each by its own cost model: when the models differ
// the report says so, as the ratio then compares models as much as plans.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/plan/plan_file.h"

namespace embshard {

// One plan's identity and headline figures.
struct PlanDiffSide {
  std::string path;
  std::string algorithm;
  std::string cost_model;
  int64_t batch_size = 0;
  int num_devices = 0;
  double cost_ms = 0;
  int critical_device = 0;
};

struct DeviceComparison {
  int device = 0;
  // Absent where that plan has fewer devices.
  std::optional<PlanFileDevice> a, b;
  std::optional<int64_t> capacity_a_bytes, capacity_b_bytes;
  // Bytes of tables that B places on this device and A had elsewhere: what
  // the device would receive to go from A to B.
  int64_t received_bytes = 0;

  // B - A of each figure; an absent side counts as zero.
  PlanFileDevice delta() const;
};

// What changed about a table, B against A.
struct TableChange {
  bool type = false;     // sharding type differs
  bool split = false;    // the pieces (row and column ranges) differ
  bool devices = false;  // some of the table is on another device
  bool any() const { return type || split || devices; }
};

struct TableComparison {
  std::string name;
  int64_t rows = 0;
  int dim = 0;
  std::string type_a, type_b;
  // "2:64 3:64": device:cols per piece, in column order; a piece of some of
  // the rows adds its row range, "0:64[0:5000]"; a replica is "d:all".
  std::string placement_a, placement_b;
  TableChange change;
  // Bytes (weights and optimizer state, MemoryModel's) of the pieces that sit
  // on a device in B that did not hold them in A.
  int64_t moved_bytes = 0;
};

struct PlanDiff {
  PlanDiffSide a, b;
  std::vector<DeviceComparison> devices;  // max of the two device counts
  std::vector<TableComparison> tables;    // every table, in A's order
  std::vector<int> changed;               // indices into `tables` of those that changed
  int64_t moved_bytes = 0;                // over all tables

  // B's predicted cost over A's: below 1, B is predicted faster.
  double cost_ratio() const { return b.cost_ms / a.cost_ms; }
  bool same_cost_model() const { return a.cost_model == b.cost_model; }
};

// Error, naming both files and the first table (in A's order, then B's)
// that one plan lacks or that differs in rows or dim: plans of different
// tables do not compare. The order of the tables may differ.
PlanDiff diff_plans(const PlanFile& a, const PlanFile& b);

// Per device side by side (A, B, B - A), the costs and their ratio, then the
// tables that changed (every table with `all_tables`).
std::string plan_diff_text(const PlanDiff& diff, bool all_tables);

// The same as JSON ({"format": "embshard-plan-diff", "version": 1, ...};
// docs/formats.md lists the fields). `tables` holds the
// changed tables only, unless `all_tables`.
nlohmann::json plan_diff_json(const PlanDiff& diff, bool all_tables);

}  // namespace embshard
