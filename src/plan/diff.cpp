// Two plans of the same tables compared: devices, tables, bytes moved.
#include "embshard/plan/diff.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/plan/plan.h"
#include "embshard/plan/report.h"
#include "embshard/util/error.h"
#include "embshard/util/text_table.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

// A rectangle of a table on a device (a shard of the file). A replica is the
// whole table, once per device that holds one.
using Piece = PlanFileShard;

auto key(const Piece& p) { return std::tie(p.row_offset, p.col_offset, p.rows, p.cols, p.device); }

bool same_rect(const Piece& a, const Piece& b) {
  return a.row_offset == b.row_offset && a.rows == b.rows && a.col_offset == b.col_offset &&
         a.cols == b.cols;
}

// Sorted by row range, then column, then device: the order placements read in.
std::vector<Piece> pieces(const PlanFileTable& t) {
  std::vector<Piece> out;
  if (t.replicated()) {
    for (int d : t.ranks) out.push_back({0, t.rows, 0, t.dim, d});
  } else {
    for (const PlanFileShard& s : t.shards) {
      out.push_back({s.row_offset, s.rows, s.col_offset, s.cols, s.device});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Piece& x, const Piece& y) { return key(x) < key(y); });
  return out;
}

std::string placement_text(const PlanFileTable& t, const std::vector<Piece>& ps) {
  std::string out;
  for (const Piece& p : ps) {
    if (!out.empty()) out += ' ';
    out += shard_text(p.device, p.cols, p.row_offset, p.rows, t.rows, t.replicated());
  }
  return out;
}

// The pieces' rectangles, devices aside.
bool same_cut(const std::vector<Piece>& a, const std::vector<Piece>& b) {
  auto rects = [](std::vector<Piece> ps) {
    for (Piece& p : ps) p.device = 0;
    std::sort(ps.begin(), ps.end(),
              [](const Piece& x, const Piece& y) { return key(x) < key(y); });
    ps.erase(std::unique(ps.begin(), ps.end(),
                         [](const Piece& x, const Piece& y) { return same_rect(x, y); }),
             ps.end());
    return ps;
  };
  const std::vector<Piece> ra = rects(a), rb = rects(b);
  return std::equal(ra.begin(), ra.end(), rb.begin(), rb.end(),
                    [](const Piece& x, const Piece& y) { return same_rect(x, y); });
}

// Bytes of B's pieces that their device did not hold in A, added to each
// receiving device (B's memory model: the weights in B's data type
// with their per-weight optimizer state, and the row-wise state once per row
// that receives any). In a sharded A every value sits on exactly one
// device, so summing overlaps with A's pieces on other devices counts each
// moved weight once; a replicated A holds every value on each of its devices,
// so a piece moves whole or not at all.
int64_t moved_bytes(const MemoryModel& memory, DataType type, const PlanFileTable& ta,
                    const std::vector<Piece>& a, const std::vector<Piece>& b,
                    std::vector<int64_t>& received_bytes) {
  int64_t total = 0;
  for (const Piece& pb : b) {
    int64_t bytes = 0;
    if (ta.replicated()) {
      const bool held = std::find(ta.ranks.begin(), ta.ranks.end(), pb.device) != ta.ranks.end();
      bytes = held ? 0 : memory.shard_bytes(type, pb.rows, pb.cols);
    } else {
      std::vector<std::pair<int64_t, int64_t>> rows_in;  // row ranges that receive weights
      for (const Piece& pa : a) {
        if (pa.device == pb.device) continue;
        const int64_t first = std::max(pa.row_offset, pb.row_offset);
        const int64_t end = std::min(pa.row_offset + pa.rows, pb.row_offset + pb.rows);
        const int cols = std::min(pa.col_offset + pa.cols, pb.col_offset + pb.cols) -
                         std::max(pa.col_offset, pb.col_offset);
        if (end <= first || cols <= 0) continue;
        bytes += (end - first) *
                 (data_type_row_bytes(type, cols) + cols * memory.optimizer_bytes_per_weight);
        rows_in.emplace_back(first, end);
      }
      std::sort(rows_in.begin(), rows_in.end());
      int64_t covered_to = std::numeric_limits<int64_t>::min();
      for (const auto& [first, end] : rows_in) {  // each row's state once
        const int64_t from = std::max(first, covered_to);
        if (end > from) bytes += (end - from) * memory.optimizer_bytes_per_row;
        covered_to = std::max(covered_to, end);
      }
    }
    received_bytes[pb.device] += bytes;
    total += bytes;
  }
  return total;
}

// Error unless both plans have the same tables with the same shapes; the
// first table (A's order, then B's) that differs is named.
void check_same_tables(const PlanFile& a, const PlanFile& b) {
  std::map<std::string, const PlanFileTable*> in_b;
  for (const PlanFileTable& t : b.tables) in_b[t.name] = &t;
  for (const PlanFileTable& t : a.tables) {
    const auto it = in_b.find(t.name);
    ES_CHECK(it != in_b.end(), "{} and {} plan different tables: table '{}' is in {} but not in {}",
             a.path, b.path, t.name, a.path, b.path);
    const PlanFileTable& u = *it->second;
    ES_CHECK(t.rows == u.rows && t.dim == u.dim,
             "{} and {} plan different tables: table '{}' is {} rows x dim {} in {} but {} rows x "
             "dim {} in {}",
             a.path, b.path, t.name, t.rows, t.dim, a.path, u.rows, u.dim, b.path);
  }
  std::map<std::string, const PlanFileTable*> in_a;
  for (const PlanFileTable& t : a.tables) in_a[t.name] = &t;
  for (const PlanFileTable& t : b.tables) {
    ES_CHECK(in_a.count(t.name),
             "{} and {} plan different tables: table '{}' is in {} but not in {}", a.path, b.path,
             t.name, b.path, a.path);
  }
}

TableComparison compare_table(const MemoryModel& memory, const PlanFileTable& ta,
                              const PlanFileTable& tb, std::vector<int64_t>& received_bytes) {
  const std::vector<Piece> pa = pieces(ta), pb = pieces(tb);
  TableComparison c;
  c.name = ta.name;
  c.rows = ta.rows;
  c.dim = ta.dim;
  c.type_a = ta.sharding_type;
  c.type_b = tb.sharding_type;
  c.placement_a = placement_text(ta, pa);
  c.placement_b = placement_text(tb, pb);
  c.moved_bytes = moved_bytes(memory, tb.data_type, ta, pa, pb, received_bytes);
  c.change.type = c.type_a != c.type_b;
  c.change.split = !same_cut(pa, pb);
  c.change.devices = c.moved_bytes > 0;
  return c;
}

PlanDiffSide side(const PlanFile& p) {
  return {p.path,
          p.algorithm,
          p.cost_model,
          p.batch_size,
          p.num_devices,
          p.predicted.cost_ms,
          p.predicted.critical_device};
}

}  // namespace

PlanFileDevice DeviceComparison::delta() const {
  const PlanFileDevice x = a.value_or(PlanFileDevice{}), y = b.value_or(PlanFileDevice{});
  PlanFileDevice d;
  d.memory_bytes = y.memory_bytes - x.memory_bytes;
  d.memory_fraction = y.memory_fraction - x.memory_fraction;
  d.compute_ms = y.compute_ms - x.compute_ms;
  d.fwd_comm_ms = y.fwd_comm_ms - x.fwd_comm_ms;
  d.bwd_comm_ms = y.bwd_comm_ms - x.bwd_comm_ms;
  d.total_ms = y.total_ms - x.total_ms;
  d.num_shards = y.num_shards - x.num_shards;
  d.dim_sum = y.dim_sum - x.dim_sum;
  return d;
}

PlanDiff diff_plans(const PlanFile& a, const PlanFile& b) {
  check_same_tables(a, b);
  PlanDiff diff;
  diff.a = side(a);
  diff.b = side(b);
  const int devices = std::max(a.num_devices, b.num_devices);
  std::vector<int64_t> received(devices, 0);
  std::map<std::string, const PlanFileTable*> in_b;
  for (const PlanFileTable& t : b.tables) in_b[t.name] = &t;
  for (const PlanFileTable& ta : a.tables) {
    const PlanFileTable& tb = *in_b.at(ta.name);
    const TableComparison c = compare_table(b.memory, ta, tb, received);
    if (c.change.any()) diff.changed.push_back(static_cast<int>(diff.tables.size()));
    diff.moved_bytes += c.moved_bytes;
    diff.tables.push_back(c);
  }
  for (int d = 0; d < devices; ++d) {
    DeviceComparison c;
    c.device = d;
    if (d < a.num_devices) {
      c.a = a.predicted.devices[d];
      c.capacity_a_bytes = a.device_memory_bytes[d];
    }
    if (d < b.num_devices) {
      c.b = b.predicted.devices[d];
      c.capacity_b_bytes = b.device_memory_bytes[d];
    }
    c.received_bytes = received[d];
    diff.devices.push_back(c);
  }
  return diff;
}

namespace {

std::string ms(const std::optional<PlanFileDevice>& d, double PlanFileDevice::*field) {
  return d ? fmt::format("{:.3f}", (*d).*field) : "-";
}

std::string signed_ms(double x) { return fmt::format("{:+.3f}", x); }

std::string signed_bytes(int64_t bytes) {
  if (bytes == 0) return "0 B";
  return fmt::format("{}{}", bytes > 0 ? '+' : '-',
                     format_bytes(static_cast<double>(bytes > 0 ? bytes : -bytes)));
}

std::string change_tags(const TableChange& c) {
  std::string out;
  for (const auto& [on, tag] :
       {std::pair{c.type, "type"}, std::pair{c.split, "split"}, std::pair{c.devices, "devices"}}) {
    if (!on) continue;
    if (!out.empty()) out += ',';
    out += tag;
  }
  return out;
}

std::string device_table(const PlanDiff& diff) {
  TextTable table({"device", "memory A", "memory B", "memory B-A", "compute A", "compute B",
                   "fwd A", "fwd B", "bwd A", "bwd B", "total A", "total B", "total B-A",
                   "receives"});
  for (const DeviceComparison& c : diff.devices) {
    // The critical device of each plan is starred on its total.
    auto total = [&](const std::optional<PlanFileDevice>& d, int critical) {
      return d ? fmt::format("{:.3f}{}", d->total_ms, c.device == critical ? "*" : " ") : "-";
    };
    auto memory = [](const std::optional<PlanFileDevice>& d) {
      return d ? format_bytes(static_cast<double>(d->memory_bytes)) : "-";
    };
    const PlanFileDevice delta = c.delta();
    table.add_row({std::to_string(c.device), memory(c.a), memory(c.b),
                   signed_bytes(delta.memory_bytes), ms(c.a, &PlanFileDevice::compute_ms),
                   ms(c.b, &PlanFileDevice::compute_ms), ms(c.a, &PlanFileDevice::fwd_comm_ms),
                   ms(c.b, &PlanFileDevice::fwd_comm_ms), ms(c.a, &PlanFileDevice::bwd_comm_ms),
                   ms(c.b, &PlanFileDevice::bwd_comm_ms), total(c.a, diff.a.critical_device),
                   total(c.b, diff.b.critical_device), signed_ms(delta.total_ms),
                   format_bytes(static_cast<double>(c.received_bytes))});
  }
  return table.render();
}

std::string table_rows(const PlanDiff& diff, bool all_tables) {
  TextTable table({"table", "rows", "dim", "type A", "type B", "placement A", "placement B",
                   "changed", "moves"});
  table.align_left(5);
  table.align_left(6);
  auto add = [&](const TableComparison& t) {
    table.add_row({t.name, std::to_string(t.rows), std::to_string(t.dim), t.type_a,
                   t.type_b == t.type_a ? "=" : t.type_b, t.placement_a,
                   t.placement_b == t.placement_a ? "=" : t.placement_b,
                   t.change.any() ? change_tags(t.change) : "-",
                   format_bytes(static_cast<double>(t.moved_bytes))});
  };
  if (all_tables) {
    for (const TableComparison& t : diff.tables) add(t);
  } else {
    for (int i : diff.changed) add(diff.tables[i]);
  }
  return table.render();
}

std::string side_line(const char* label, const PlanDiffSide& s) {
  return fmt::format("{}: {}: {} with cost model {}, {}, batch {}\n", label, s.path,
                     s.algorithm, s.cost_model, count_of(s.num_devices, "device"), s.batch_size);
}

}  // namespace

std::string plan_diff_text(const PlanDiff& diff, bool all_tables) {
  std::string out = side_line("A", diff.a) + side_line("B", diff.b);
  out +=
      "per device, predicted ms (* marks each plan's critical device); 'receives': bytes the "
      "device gets to go from A to B\n";
  out += device_table(diff);
  const double ratio = diff.cost_ratio();
  // Within 0.05%, the figures' last printed digit: no difference to speak of.
  const std::string verdict = std::abs(1.0 - ratio) < 5e-4
                                  ? std::string("the same")
                                  : fmt::format("B {:.1f}% {}", 100.0 * std::abs(1.0 - ratio),
                                                ratio < 1.0 ? "cheaper" : "dearer");
  out += fmt::format(
      "predicted cost: A {:.3f} ms (critical device {}), B {:.3f} ms (critical device {}); "
      "B / A = {:.3f} ({})\n",
      diff.a.cost_ms, diff.a.critical_device, diff.b.cost_ms, diff.b.critical_device, ratio,
      verdict);
  if (!diff.same_cost_model()) {
    out +=
        "note: the plans were costed by different cost models: the ratio compares the models "
        "as much as the plans\n";
  }
  int type = 0, split = 0, devices = 0;
  for (int i : diff.changed) {
    type += diff.tables[i].change.type;
    split += diff.tables[i].change.split;
    devices += diff.tables[i].change.devices;
  }
  if (diff.changed.empty()) {
    out += fmt::format("tables changed: none of {}: both plans place every table alike\n",
                       diff.tables.size());
    if (all_tables) out += table_rows(diff, true);
    return out;
  }
  out += fmt::format(
      "tables changed: {} of {} ({} in sharding type, {} in cut, {} in devices); {} move "
      "between devices\n",
      diff.changed.size(), diff.tables.size(), type, split, devices,
      format_bytes(static_cast<double>(diff.moved_bytes)));
  out += table_rows(diff, all_tables);
  return out;
}

namespace {

nlohmann::json device_json(const PlanFileDevice& d) {
  return {{"memory_bytes", d.memory_bytes},
          {"compute_ms", d.compute_ms},
          {"fwd_comm_ms", d.fwd_comm_ms},
          {"bwd_comm_ms", d.bwd_comm_ms},
          {"total_ms", d.total_ms},
          {"num_shards", d.num_shards},
          {"dim_sum", d.dim_sum}};
}

nlohmann::json side_json(const PlanDiffSide& s) {
  return {{"path", s.path},
          {"algorithm", s.algorithm},
          {"cost_model", s.cost_model},
          {"batch_size", s.batch_size},
          {"num_devices", s.num_devices},
          {"cost_ms", s.cost_ms},
          {"critical_device", s.critical_device}};
}

nlohmann::json table_json(const TableComparison& t) {
  nlohmann::json changes = nlohmann::json::array();
  if (t.change.type) changes.push_back("type");
  if (t.change.split) changes.push_back("split");
  if (t.change.devices) changes.push_back("devices");
  return {{"name", t.name},
          {"rows", t.rows},
          {"dim", t.dim},
          {"a", {{"sharding_type", t.type_a}, {"placement", t.placement_a}}},
          {"b", {{"sharding_type", t.type_b}, {"placement", t.placement_b}}},
          {"changes", changes},
          {"moved_bytes", t.moved_bytes}};
}

}  // namespace

nlohmann::json plan_diff_json(const PlanDiff& diff, bool all_tables) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceComparison& c : diff.devices) {
    nlohmann::json a = c.a ? device_json(*c.a) : nlohmann::json(nullptr);
    nlohmann::json b = c.b ? device_json(*c.b) : nlohmann::json(nullptr);
    if (c.a) a["capacity_bytes"] = *c.capacity_a_bytes;
    if (c.b) b["capacity_bytes"] = *c.capacity_b_bytes;
    devices.push_back({{"device", c.device},
                       {"a", a},
                       {"b", b},
                       {"delta", device_json(c.delta())},
                       {"received_bytes", c.received_bytes}});
  }
  nlohmann::json changed = nlohmann::json::array();
  for (int i : diff.changed) changed.push_back(diff.tables[i].name);
  nlohmann::json tables = nlohmann::json::array();
  for (size_t i = 0; i < diff.tables.size(); ++i) {
    if (all_tables || diff.tables[i].change.any()) tables.push_back(table_json(diff.tables[i]));
  }
  return {{"format", "embshard-plan-diff"},
          {"version", 1},
          {"a", side_json(diff.a)},
          {"b", side_json(diff.b)},
          {"cost_ratio", diff.cost_ratio()},
          {"same_cost_model", diff.same_cost_model()},
          {"num_tables", diff.tables.size()},
          {"changed_tables", changed},
          {"moved_bytes", diff.moved_bytes},
          {"devices", devices},
          {"tables", tables}};
}

}  // namespace embshard
