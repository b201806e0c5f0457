// Tasks and the plan validator.
#include "embshard/plan/plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/ranges.h>

#include "embshard/util/error.h"
#include "embshard/util/units.h"
#include "embshard/workload/trace_shard.h"

namespace embshard {
namespace {

std::string gb(int64_t bytes) { return fmt::format("{:.3f} GB ({} bytes)", bytes / 1e9, bytes); }

// Why the task cannot fit, piece by piece: the smallest piece of every table
// any allowed type makes must fit the device it may go to, and all tables must
// fit all devices.
void check_feasible(const PlanTask& task) {
  const int64_t largest = *std::max_element(task.device_mem_bytes.begin(),
                                            task.device_mem_bytes.end());
  int64_t total_need = 0, total_have = 0;
  // Capacities sum up to INT64_MAX at most (9e18 bytes each is a valid --mem).
  for (int64_t c : task.device_mem_bytes) {
    total_have = c > std::numeric_limits<int64_t>::max() - total_have
                     ? std::numeric_limits<int64_t>::max()
                     : total_have + c;
  }
  std::vector<int64_t> pinned(task.device_mem_bytes.size(), 0);
  std::vector<std::string> pinned_names(task.device_mem_bytes.size());
  for (int t = 0; t < task.num_tables(); ++t) {
    const TableSpec& s = task.tables[t];
    const int pin = task.pinned_device[t];
    total_need += task.table_bytes(t);
    if (pin >= 0) {
      ES_CHECK(task.table_bytes(t) <= task.device_mem_bytes[pin],
               "table '{}' ({} rows x dim {}) needs {} but is pinned to device {} which holds "
               "{}",
               s.name, s.rows, s.dim, gb(task.table_bytes(t)), pin,
               gb(task.device_mem_bytes[pin]));
      pinned[pin] += task.table_bytes(t);
      pinned_names[pin] += (pinned_names[pin].empty() ? "'" : ", '") + s.name + "'";
      ES_CHECK(pinned[pin] <= task.device_mem_bytes[pin],
               "the tables pinned to device {} ({}) need {} together but it holds {}", pin,
               pinned_names[pin], gb(pinned[pin]), gb(task.device_mem_bytes[pin]));
      continue;
    }
    const int cols = task.min_piece_cols(t);
    const int64_t piece = task.min_piece_bytes(t);
    const bool by_rows = piece < task.piece_bytes(t, s.rows, cols);
    ES_CHECK(piece <= largest,
             "table '{}' ({} rows x dim {}, {}) cannot fit: its smallest {} needs {} but the "
             "largest device holds {}{}",
             s.name, s.rows, s.dim, gb(task.table_bytes(t)),
             by_rows ? fmt::format("row piece ({} devices' share of its rows)",
                                   task.num_devices())
             : cols == s.dim ? std::string(
                                   task.no_split[t] ? "form (--no-split keeps it whole)"
                                   : !task.types.allows(ShardingType::kColumnWise) &&
                                           !task.types.any_row_split()
                                       ? "form (the allowed sharding types keep it whole)"
                                       : "form (no allowed split makes it smaller here)")
                             : fmt::format("column piece ({} columns)", cols),
             gb(piece), gb(largest),
             task.splittable(t) && !task.types.any_row_split()
                 ? " (row_wise is not among the allowed sharding types)"
                 : "");
  }
  const int n = task.num_devices();
  ES_CHECK(total_need <= total_have, "the tables need {} in all but {}", gb(total_need),
           n == 1 ? fmt::format("the one device holds {}", gb(total_have))
                  : fmt::format("the {} devices hold {} together", n, gb(total_have)));
}

}  // namespace

bool SplitRule::allows(int cols) const {
  if (cols <= 0 || multiple <= 0 || cols % multiple != 0) return false;
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), cols) != allowed.end();
}

int PlanTask::min_piece_cols(int t) const {
  int cols = tables[t].dim;
  if (!splittable(t) || !types.allows(ShardingType::kColumnWise)) return cols;
  while (split.can_halve(cols)) cols /= 2;
  return cols;
}

bool PlanTask::row_splittable(int t, int k) const {
  if (!splittable(t) || k < 2 || k > num_devices()) return false;
  // TorchRec's blocks of ceil(rows / k): every one must hold a row.
  if ((tables[t].rows + k - 1) / k * (k - 1) >= tables[t].rows) return false;
  return types.allows(k == num_devices() ? ShardingType::kRowWise : ShardingType::kTableRowWise);
}

int64_t PlanTask::min_piece_bytes(int t) const {
  const TableSpec& s = tables[t];
  const int cols = min_piece_cols(t);
  int64_t best = piece_bytes(t, s.rows, cols);
  // The most row pieces: every device (row_wise) or all but one (table_row_wise).
  for (int k = num_devices(); k >= 2; --k) {
    if (!row_splittable(t, k)) continue;
    const int64_t block = (s.rows + k - 1) / k;
    best = std::min(best, piece_bytes(t, block, s.dim));
    if (types.allows(ShardingType::kGridShard)) best = std::min(best, piece_bytes(t, block, cols));
    break;
  }
  return best;
}

double PlanTask::lookup_share(int t, int64_t row_offset, int64_t rows) const {
  if (rows >= tables[t].rows) return 1.0;
  if (piece_stats != nullptr && static_cast<size_t>(t) < source_table.size() &&
      source_table[t] >= 0) {
    return piece_stats->lookup_share(source_table[t], tables[t], row_offset, rows);
  }
  return static_cast<double>(rows) / static_cast<double>(tables[t].rows);
}

std::vector<int64_t> row_block_sizes(const TableSpec& table, int k) {
  ES_CHECK(k >= 1, "table '{}': split into {} row blocks, need at least 1", table.name, k);
  const int64_t block = (table.rows + k - 1) / k;
  ES_CHECK(block * (k - 1) < table.rows,
           "table '{}': {} rows split into {} blocks of {} rows leaves the last block empty",
           table.name, table.rows, k, block);
  std::vector<int64_t> sizes(k, block);
  sizes.back() = table.rows - block * (k - 1);
  return sizes;
}

const std::vector<std::string>& sharding_type_names() {
  static const std::vector<std::string> names = {"table_wise",     "column_wise",   "row_wise",
                                                 "table_row_wise", "data_parallel", "grid_shard"};
  return names;
}

ShardingTypes ShardingTypes::parse(const std::string& list, const std::string& option) {
  ShardingTypes out;
  out.mask = 0;
  // "table_wise, column_wise" as the shell passes it quoted: spaces around a name.
  for (const std::string& name : split_names(list)) {
    const auto& names = sharding_type_names();
    const auto it = std::find(names.begin(), names.end(), name);
    ES_CHECK(it != names.end(), "{} {}: unknown sharding type '{}'; valid types: {}", option,
             list, name, fmt::join(names, ", "));
    out.mask |= 1u << (it - names.begin());
  }
  ES_CHECK(out.allows(ShardingType::kTableWise),
           "{} {}: table_wise must be allowed (the tables no other type splits stay whole)",
           option, list);
  return out;
}

std::string ShardingTypes::str() const {
  std::string out;
  for (size_t i = 0; i < sharding_type_names().size(); ++i) {
    if ((mask & (1u << i)) == 0) continue;
    if (!out.empty()) out += ",";
    out += sharding_type_names()[i];
  }
  return out;
}

int64_t default_device_capacity(const std::vector<TableSpec>& tables, int devices,
                                double headroom, MemoryModel memory) {
  ES_CHECK(devices > 0, "devices is {}, must be at least 1", devices);
  int64_t total = 0, narrowest = 0;
  for (const TableSpec& t : tables) {
    total += memory.shard_bytes(t.data_type, t.rows, t.dim);
    narrowest = std::max(narrowest, memory.shard_bytes(t.data_type, t.rows, std::min(t.dim, 4)));
  }
  const double even = static_cast<double>(total) / devices;
  return static_cast<int64_t>(headroom * std::max(even, static_cast<double>(narrowest))) + 1;
}

std::vector<int64_t> device_capacities(int count, int64_t each_bytes,
                                       const std::vector<int64_t>& list) {
  ES_CHECK(count > 0, "--devices is {}, must be at least 1", count);
  if (!list.empty()) {
    ES_CHECK(static_cast<int>(list.size()) == count,
             "--mem lists {} capacities but --devices is {}: give one per device",
             list.size(), count);
    for (size_t d = 0; d < list.size(); ++d) {
      ES_CHECK(list[d] > 0, "--mem capacity of device {} is {}, must be positive", d, list[d]);
    }
    return list;
  }
  ES_CHECK(each_bytes > 0, "--mem-per-device is {}, must be positive", each_bytes);
  return std::vector<int64_t>(count, each_bytes);
}

void check_table_sizes(const std::vector<TableSpec>& tables, StepKind step) {
  for (const TableSpec& s : tables) {
    ES_CHECK(s.rows > 0 && s.dim > 0, "table '{}' has {} rows and dim {}, both must be positive",
             s.name, s.rows, s.dim);
    ES_CHECK(s.rows <= kMaxRows,
             "table '{}' has {} rows, past the {} (2^40) embshard plans for: check the units",
             s.name, s.rows, kMaxRows);
    ES_CHECK(s.dim <= kMaxDim, "table '{}' has dim {}, past the {} embshard plans for", s.name,
             s.dim, kMaxDim);
    // Quantized tables have a forward only.
    ES_CHECK(step == StepKind::kInference || data_type_trains(s.data_type),
             "table '{}' is {}: quantized tables are forward-only; plan inference (--task "
             "inference) or the table as fp16, bf16 or fp32",
             s.name, data_type_name(s.data_type));
  }
}

PlanTask make_task(std::vector<TableSpec> tables, int64_t batch_size,
                   std::vector<int64_t> device_mem_bytes, const TaskConstraints& constraints,
                   MemoryModel memory, StepKind step) {
  ES_CHECK(!device_mem_bytes.empty(), "a task needs at least one device, got 0");
  ES_CHECK(!tables.empty(), "a task needs at least one table, got 0");
  ES_CHECK(batch_size > 0, "batch size is {}, must be positive", batch_size);
  ES_CHECK(batch_size <= kMaxBatch, "batch size {} is past the {} embshard plans for", batch_size,
           kMaxBatch);
  ES_CHECK(device_mem_bytes.size() <= static_cast<size_t>(kMaxDevices),
           "{} devices is past the {} embshard plans for", device_mem_bytes.size(), kMaxDevices);
  PlanTask task;
  task.tables = std::move(tables);
  task.batch_size = batch_size;
  task.device_mem_bytes = std::move(device_mem_bytes);
  task.memory = memory;
  task.step = step;
  task.split = constraints.split;
  task.types = constraints.types;
  task.pinned_device.assign(task.tables.size(), -1);
  task.no_split.assign(task.tables.size(), 0);
  check_table_sizes(task.tables, step);
  std::unordered_map<std::string, int> index;
  for (int t = 0; t < task.num_tables(); ++t) {
    ES_CHECK(index.emplace(task.tables[t].name, t).second, "table name '{}' appears twice",
             task.tables[t].name);
  }
  auto find = [&](const std::string& name, const char* what) {
    const auto it = index.find(name);
    ES_CHECK(it != index.end(), "{} names table '{}', which is not in the task", what, name);
    return it->second;
  };
  for (const TablePin& pin : constraints.pins) {
    const int t = find(pin.table, "--pin");
    ES_CHECK(pin.device >= 0 && pin.device < task.num_devices(),
             "--pin {}={}: device {} does not exist (devices 0..{})", pin.table, pin.device,
             pin.device, task.num_devices() - 1);
    ES_CHECK(task.pinned_device[t] < 0 || task.pinned_device[t] == pin.device,
             "--pin {}={}: table '{}' is already pinned to device {}", pin.table, pin.device,
             pin.table, task.pinned_device[t]);
    task.pinned_device[t] = pin.device;
  }
  for (const std::string& name : constraints.no_split) task.no_split[find(name, "--no-split")] = 1;
  check_feasible(task);
  return task;
}

std::vector<int64_t> table_memory_bytes(const PlanTask& task, const Plan& plan) {
  std::vector<int64_t> bytes(task.tables.size(), 0);
  for (const Shard& s : plan.shards) bytes[s.table] += task.piece_bytes(s.table, s.rows, s.cols);
  return bytes;
}

std::vector<int64_t> device_memory_bytes(const PlanTask& task, const Plan& plan) {
  std::vector<int64_t> used(task.num_devices(), 0);
  for (const Shard& s : plan.shards) {
    if (s.device >= 0 && s.device < task.num_devices()) {
      used[s.device] += task.piece_bytes(s.table, s.rows, s.cols);
    }
  }
  return used;
}

namespace {

void check_shard_bounds(const PlanTask& task, const Shard& s) {
  ES_CHECK(s.table >= 0 && s.table < task.num_tables(), "plan has a shard of table {} (of {})",
           s.table, task.num_tables());
  const TableSpec& spec = task.tables[s.table];
  ES_CHECK(s.device >= 0 && s.device < task.num_devices(),
           "table '{}': shard on device {}, which does not exist ({} devices)", spec.name,
           s.device, task.num_devices());
  ES_CHECK(s.cols > 0 && s.rows > 0 && s.col_offset >= 0 && s.row_offset >= 0 &&
               s.col_offset + s.cols <= spec.dim && s.row_offset + s.rows <= spec.rows,
           "table '{}': shard columns [{}, {}) x rows [{}, {}) outside its {} rows x dim {}",
           spec.name, s.col_offset, s.col_offset + s.cols, s.row_offset,
           s.row_offset + s.rows, spec.rows, spec.dim);
}

// Rectangles that do not overlap and whose areas add up to the table's tile it
// exactly once.
void check_exact_cover(const PlanTask& task, int t, const std::vector<const Shard*>& shards) {
  const TableSpec& spec = task.tables[t];
  ES_CHECK(!shards.empty(), "table '{}' has no shard in the plan", spec.name);
  __int128 area = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const Shard& a = *shards[i];
    area += static_cast<__int128>(a.rows) * a.cols;
    for (size_t j = i + 1; j < shards.size(); ++j) {
      const Shard& b = *shards[j];
      const bool cols_overlap = a.col_offset < b.col_offset + b.cols &&
                                b.col_offset < a.col_offset + a.cols;
      const bool rows_overlap = a.row_offset < b.row_offset + b.rows &&
                                b.row_offset < a.row_offset + a.rows;
      ES_CHECK(!(cols_overlap && rows_overlap),
               "table '{}': columns [{}, {}) and [{}, {}) are covered twice in overlapping row "
               "ranges",
               spec.name, a.col_offset, a.col_offset + a.cols, b.col_offset,
               b.col_offset + b.cols);
    }
  }
  ES_CHECK(area == static_cast<__int128>(spec.rows) * spec.dim,
           "table '{}': its shards cover {} of its {} rows x {} columns", spec.name,
           static_cast<int64_t>(area), spec.rows, spec.dim);
}

void check_replicas(const PlanTask& task, int t, const std::vector<const Shard*>& shards) {
  const TableSpec& spec = task.tables[t];
  std::vector<int> copies(task.num_devices(), 0);
  for (const Shard* s : shards) {
    ES_CHECK(s->replica && s->col_offset == 0 && s->cols == spec.dim && s->row_offset == 0 &&
                 s->rows == spec.rows,
             "table '{}' is data parallel, so every shard must be a full replica", spec.name);
    ++copies[s->device];
  }
  for (int d = 0; d < task.num_devices(); ++d) {
    ES_CHECK(copies[d] == 1, "data-parallel table '{}' has {} copies on device {}, must have 1",
             spec.name, copies[d], d);
    ES_CHECK(task.table_bytes(t) <= task.device_mem_bytes[d],
             "data-parallel table '{}' needs {} on every device but device {} holds {}",
             spec.name, gb(task.table_bytes(t)), d, gb(task.device_mem_bytes[d]));
  }
}

void check_constraints(const PlanTask& task, int t, const std::vector<const Shard*>& shards) {
  const TableSpec& spec = task.tables[t];
  for (const Shard* s : shards) {
    if (task.pinned_device[t] >= 0) {
      ES_CHECK(s->device == task.pinned_device[t],
               "table '{}' is pinned to device {} but a shard is on device {}", spec.name,
               task.pinned_device[t], s->device);
    }
    if (s->cols != spec.dim) {
      ES_CHECK(task.split.allows(s->cols),
               "table '{}': a column piece of width {} is not an allowed split width", spec.name,
               s->cols);
    }
  }
  if (task.no_split[t] && !shards[0]->replica) {
    ES_CHECK(shards.size() == 1, "table '{}' may not be split but has {} shards", spec.name,
             shards.size());
  }
}

ShardingType type_of(const std::string& name) {
  const auto& names = sharding_type_names();
  const auto it = std::find(names.begin(), names.end(), name);
  ES_CHECK(it != names.end(), "sharding type '{}' is not one embshard plans", name);
  return static_cast<ShardingType>(1u << (it - names.begin()));
}

void check_type_allowed(const PlanTask& task, const Plan& plan, int t) {
  const std::string type = sharding_type(task, plan, t);
  ES_CHECK(task.types.allows(type_of(type)),
           "table '{}' is {}, which the allowed sharding types ({}) exclude", task.tables[t].name,
           type, task.types.str());
}

// TorchRec's row-wise input distribution sends the lookups of rows
// [b x block, (b + 1) x block) to rank b, so block b must be on device b.
void check_row_wise_order(const PlanTask& task, const Plan& plan, int t,
                          const std::vector<const Shard*>& shards) {
  if (sharding_type(task, plan, t) != "row_wise") return;
  const TableSpec& spec = task.tables[t];
  const int64_t block = (spec.rows + task.num_devices() - 1) / task.num_devices();
  for (const Shard* s : shards) {
    ES_CHECK(s->row_offset / block == s->device,
             "table '{}' is row_wise, and TorchRec serves row block b (rows [b x {}, (b + 1) x "
             "{})) from rank b, but rows [{}, {}) are on device {}",
             spec.name, block, block, s->row_offset, s->row_offset + s->rows, s->device);
  }
}

}  // namespace

void validate_plan(const PlanTask& task, const Plan& plan) {
  std::vector<std::vector<const Shard*>> by_table(task.tables.size());
  for (const Shard& s : plan.shards) {
    check_shard_bounds(task, s);
    by_table[s.table].push_back(&s);
  }
  for (int t = 0; t < task.num_tables(); ++t) {
    const auto& shards = by_table[t];
    ES_CHECK(!shards.empty(), "table '{}' has no shard in the plan", task.tables[t].name);
    if (shards[0]->replica) {
      check_replicas(task, t, shards);
    } else {
      for (const Shard* s : shards) {
        ES_CHECK(!s->replica, "table '{}' mixes replicas and partial shards",
                 task.tables[t].name);
      }
      check_exact_cover(task, t, shards);
    }
    check_constraints(task, t, shards);
    check_type_allowed(task, plan, t);
    check_row_wise_order(task, plan, t, shards);
  }
  const std::vector<int64_t> used = device_memory_bytes(task, plan);
  for (int d = 0; d < task.num_devices(); ++d) {
    ES_CHECK(used[d] <= task.device_mem_bytes[d],
             "device {} holds {} bytes of shards, over its capacity of {} bytes", d, used[d],
             task.device_mem_bytes[d]);
  }
}

std::string sharding_type(const PlanTask& task, const Plan& plan, int table) {
  const TableSpec& spec = task.tables[table];
  int count = 0;
  bool full_rows = true, full_cols = true, replica = false;
  std::vector<uint8_t> on(task.num_devices(), 0);
  int devices = 0;
  for (const Shard& s : plan.shards) {
    if (s.table != table) continue;
    ++count;
    if (s.device >= 0 && s.device < task.num_devices() && !on[s.device]) on[s.device] = 1, ++devices;
    replica = replica || s.replica;
    full_rows = full_rows && s.rows == spec.rows;
    full_cols = full_cols && s.cols == spec.dim;
  }
  if (replica) return "data_parallel";
  if (count <= 1) return "table_wise";
  if (full_rows) return "column_wise";
  if (full_cols) return devices == task.num_devices() ? "row_wise" : "table_row_wise";
  return "grid_shard";
}

}  // namespace embshard
