// The plan model: a sharding task (tables, devices, constraints) and a plan
// (which piece of which table lives on which device), with a validator that
// every planner's output goes through.
//
// A shard is a rectangle of one table: a column range x a row range, on one
// device. Table-wise (one shard covering the table), column-wise, row-wise and
// grid shards are rectangles that tile the table exactly once. Data-parallel
// tables are replicas: one full copy on every device, flagged `replica`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embshard/cost/topology.h"
#include "embshard/kernel/tbe.h"
#include "embshard/workload/table.h"

namespace embshard {

class PieceStats;  // embshard/workload/trace_shard.h

// Past this (and workload/table.h's kMaxRows, kMaxDim, kMaxBatch) a task is a
// typo, not a model (100,000 devices): make_task refuses it before any
// search, naming the value.
constexpr int kMaxDevices = 65536;

// What a shard costs in device memory: its rows in the table's data type
// (workload/data_type.h: a quantized row carries its scale and bias), plus
// the optimizer's state. The executor's default optimizer is row-wise
// Adagrad: one fp32 accumulator per row per shard. Adam keeps two fp32
// moments per element; SGD and inference keep nothing. Counting the state
// avoids the under-estimated memory (and OOM) that users report of planners
// that count weights only.
struct MemoryModel {
  int64_t optimizer_bytes_per_row = 4;
  int64_t optimizer_bytes_per_weight = 0;

  int64_t shard_bytes(DataType type, int64_t rows, int64_t cols) const {
    return rows * (data_type_row_bytes(type, cols) + optimizer_bytes_per_row +
                   cols * optimizer_bytes_per_weight);
  }
  // The optimizer state one row of `cols` columns keeps.
  int64_t state_bytes_per_row(int64_t cols) const {
    return optimizer_bytes_per_row + cols * optimizer_bytes_per_weight;
  }
  // The state of the executor's optimizers: SGD none, row-wise Adagrad one
  // fp32 per row, Adam two fp32 per weight.
  static MemoryModel of(OptimizerType optimizer);
  // "SGD", "row-wise Adagrad", "Adam", or the bytes where none of them.
  std::string optimizer_name() const;
};

// "sgd", "rowwise_adagrad", "adam" (TorchRec's EmbOptimType, lower case).
const std::vector<std::string>& optimizer_names();
// Error naming `option`, the value and the valid names.
OptimizerType parse_optimizer(const std::string& name, const std::string& option);

// Device memory kept from the tables for what is not an embedding table
// (dense parameters, activations, input and output buffers), taken off each
// capacity a user gives: a share of it or, where `bytes` >= 0, an amount.
// TorchRec's planner reserves 15% by default, and so does embshard.
struct StorageReserve {
  double share = 0.15;
  int64_t bytes = -1;

  int64_t of(int64_t capacity) const;
  std::string str() const;  // "15%", "2.0 GB"
  // "15%" (0-99%), a share "0.15", or a size ("2GB", "0"). Error naming `option`.
  static StorageReserve parse(const std::string& text, const std::string& option);
};

// Column widths a split may produce: a multiple of 4 (the executor's vector
// width) and, when `allowed` is non-empty, one of the listed widths.
struct SplitRule {
  int multiple = 4;
  std::vector<int> allowed;  // empty: every multiple of `multiple`

  bool allows(int cols) const;
  // Can a piece of `cols` columns be halved into two allowed pieces?
  bool can_halve(int cols) const { return cols % 2 == 0 && allows(cols / 2); }
};

// The sharding types a plan may use (TorchRec's names). A table split by rows
// over every device is row_wise, over fewer (as TorchRec does within a host)
// table_row_wise; rows x columns is grid_shard; a copy per device is
// data_parallel. table_column_wise is not proposed.
enum class ShardingType : uint32_t {
  kTableWise = 1u << 0,
  kColumnWise = 1u << 1,
  kRowWise = 1u << 2,
  kTableRowWise = 1u << 3,
  kDataParallel = 1u << 4,
  kGridShard = 1u << 5,
};
struct ShardingTypes {
  uint32_t mask = 0x3f;  // all six

  bool allows(ShardingType t) const { return (mask & static_cast<uint32_t>(t)) != 0; }
  // Either kind of row split (over all devices or over some).
  bool any_row_split() const { return allows(ShardingType::kRowWise) || allows(ShardingType::kTableRowWise); }
  static ShardingTypes all() { return {}; }
  // The names above, comma-separated ("table_wise,column_wise"). Error names
  // `option`, the unknown value and the valid names; table_wise is required
  // (a table every other type leaves whole must still have a place).
  static ShardingTypes parse(const std::string& list, const std::string& option);
  std::string str() const;
};
const std::vector<std::string>& sharding_type_names();

// The step a plan is for: training (forward, backward and the optimizer's
// update: the default) or inference (the forward alone: weights without
// optimizer state, quantized int8 and int4 tables allowed, the forward's costs).
enum class StepKind : uint8_t { kTraining, kInference };
// "training", "inference"
const std::vector<std::string>& step_kind_names();
// Error naming `option`, the value and the valid names.
StepKind parse_step_kind(const std::string& name, const std::string& option);

// What the planners are given. Build it with make_task(), which resolves the
// constraints by table name and checks them.
struct PlanTask {
  std::vector<TableSpec> tables;
  int64_t batch_size = 0;
  std::vector<int64_t> device_mem_bytes;  // capacity of each device
  Topology topology;                      // the devices' hosts (default: one)
  MemoryModel memory;
  StepKind step = StepKind::kTraining;
  SplitRule split;
  std::vector<int> pinned_device;   // per table: its device, or -1
  std::vector<uint8_t> no_split;    // per table: 1 if it must stay whole
  ShardingTypes types;              // what plans may use
  // Per table, optionally: its index in the workload whose traces the
  // measured model executes (empty: unknown).
  std::vector<int> source_table;
  // Optionally, that workload's trace: row pieces' and replicas' features
  // (pooling, distinct rows, reuse histograms) and a row piece's share of its
  // table's lookups measured on their own lookups (null: a row piece keeps
  // its table's histograms, its share of the lookups its share of the rows).
  std::shared_ptr<PieceStats> piece_stats;

  // Per device, what was taken off its memory before planning for what is
  // not embedding tables (StorageReserve); empty: nothing.
  std::vector<int64_t> reserved_bytes;

  int num_devices() const { return static_cast<int>(device_mem_bytes.size()); }
  int num_tables() const { return static_cast<int>(tables.size()); }
  int64_t table_bytes(int t) const { return piece_bytes(t, tables[t].rows, tables[t].dim); }
  // A piece of table t: `rows` x `cols` in the table's data type, with its state.
  int64_t piece_bytes(int t, int64_t rows, int64_t cols) const {
    return memory.shard_bytes(tables[t].data_type, rows, cols);
  }
  // Pinned tables are never split: all of a pinned table stays on its device.
  bool splittable(int t) const { return !no_split[t] && pinned_device[t] < 0; }
  // The narrowest column piece a table can be cut into by halvings (its dim
  // when column_wise is not allowed).
  int min_piece_cols(int t) const;
  // Whether a table may be split by rows over `k` devices (k >= 2, k <= devices).
  bool row_splittable(int t, int k) const;
  // The smallest piece of a table any allowed type makes: its bytes.
  int64_t min_piece_bytes(int t) const;
  // The share of table t's lookups whose row falls in [row_offset, row_offset
  // + rows): counted in the trace (piece_stats and source_table given), else
  // the share of the rows.
  double lookup_share(int t, int64_t row_offset, int64_t rows) const;
};

// TorchRec's contiguous row blocks: ceil(rows / k) rows each, the last the rest.
// Error when a block would be empty (rows < k blocks of ceil(rows/k)), naming the table.
std::vector<int64_t> row_block_sizes(const TableSpec& table, int k);

struct TablePin {
  std::string table;
  int device = 0;
};

struct TaskConstraints {
  std::vector<TablePin> pins;
  std::vector<std::string> no_split;
  SplitRule split;
  ShardingTypes types;  // --sharding-types
};

// Error naming the table whose rows or dim are not positive or past the
// limits above, or that is quantized in a training task (make_task calls it;
// so does planning, before any sizing).
void check_table_sizes(const std::vector<TableSpec>& tables, StepKind step = StepKind::kTraining);

// Resolves the constraints (unknown table names and out-of-range devices are
// errors) and checks that the task is feasible piece by piece: Error names the
// table that cannot fit, its bytes and the capacity it was compared with.
PlanTask make_task(std::vector<TableSpec> tables, int64_t batch_size,
                   std::vector<int64_t> device_mem_bytes, const TaskConstraints& constraints,
                   MemoryModel memory = {}, StepKind step = StepKind::kTraining);
// A capacity per device when the user gives none: `headroom` x an even split
// of the tables, so that memory binds, or `headroom` x the largest 4-column
// piece of a table where that is more (many devices, one huge table), so that
// every table fits once split.
int64_t default_device_capacity(const std::vector<TableSpec>& tables, int devices,
                                double headroom = 1.25, MemoryModel memory = {});
// The capacity list from the CLI's forms: `count` devices of `each_bytes`, or
// an explicit list (whose length must be `count`).
std::vector<int64_t> device_capacities(int count, int64_t each_bytes,
                                       const std::vector<int64_t>& list);

struct Shard {
  int table = 0;
  int col_offset = 0;
  int cols = 0;
  int64_t row_offset = 0;
  int64_t rows = 0;
  int device = 0;
  bool replica = false;  // data parallel: a full copy on every device
};

struct Plan {
  std::vector<Shard> shards;
};

// Memory of each device under the plan.
std::vector<int64_t> device_memory_bytes(const PlanTask& task, const Plan& plan);
// Bytes of each table under the plan: every piece with its row state.
std::vector<int64_t> table_memory_bytes(const PlanTask& task, const Plan& plan);

// Throws Error naming the table (or device) and the fault: a shard outside
// its table or on a device that does not exist; columns of a row range
// covered twice or not at all; a replicated table without exactly one full
// copy per device; memory over a device's capacity; a pinned table off its
// device; a no-split table in pieces; a piece of a width the split rule
// forbids.
void validate_plan(const PlanTask& task, const Plan& plan);

// TorchRec's names: "table_wise", "column_wise", "row_wise" (row pieces on
// every device), "table_row_wise" (on fewer), "grid_shard", "data_parallel".
std::string sharding_type(const PlanTask& task, const Plan& plan, int table);

}  // namespace embshard
