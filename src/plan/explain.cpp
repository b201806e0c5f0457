// Why each table is where it is: the decision against its best alternative.
#include "embshard/plan/explain.h"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/util/text_table.h"

namespace embshard {
namespace {

// "0-3,6,8-9": runs of consecutive devices as ranges.
std::string device_list(const std::set<int>& devices) {
  std::string out;
  for (auto it = devices.begin(); it != devices.end();) {
    int last = *it;
    auto next = std::next(it);
    while (next != devices.end() && *next == last + 1) last = *next++;
    if (!out.empty()) out += ',';
    out += last > *it + 1 ? fmt::format("{}-{}", *it, last)
           : last == *it  ? std::to_string(*it)
                          : fmt::format("{},{}", *it, last);
    it = next;
  }
  return out;
}

std::string describe_decision(const PlanTask& task, const Plan& plan, int table) {
  std::set<int> devices;
  int pieces = 0;
  bool replica = false;
  for (const Shard& s : plan.shards) {
    if (s.table != table) continue;
    devices.insert(s.device);
    replica = replica || s.replica;
    ++pieces;
  }
  const std::string type = sharding_type(task, plan, table);
  if (replica) return fmt::format("replicated on {} devices", devices.size());
  if (pieces == 1) return fmt::format("whole on device {}", *devices.begin());
  const std::string kind = type == "column_wise" || type == "table_column_wise" ? "column"
                           : type == "row_wise" || type == "table_row_wise"     ? "row"
                                                                                : "grid";
  return fmt::format("split: {} {} pieces on device{} {}", pieces, kind, devices.size() == 1 ? "" : "s",
                     device_list(devices));
}

// Devices worth trying for `table`: its own and the least-loaded others.
std::vector<int> devices_to_try(const PlanTask& task, const PlanPrediction& predicted,
                                const Plan& plan, int table, int max_devices) {
  std::vector<int> order(task.num_devices());
  std::iota(order.begin(), order.end(), 0);
  if (task.num_devices() <= max_devices) return order;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return predicted.devices[a].total_ms() < predicted.devices[b].total_ms();
  });
  std::set<int> chosen(order.begin(), order.begin() + max_devices);
  for (const Shard& s : plan.shards) {
    if (s.table == table) chosen.insert(s.device);
  }
  return {chosen.begin(), chosen.end()};
}

}  // namespace

std::vector<Decision> explain_plan(const PlanTask& task, const Plan& plan, ShardCosts& costs,
                                   int max_devices) {
  const PlanPrediction predicted = predict_plan(task, plan, costs);
  const std::vector<int64_t> memory = device_memory_bytes(task, plan);
  std::vector<Decision> out;
  for (int t = 0; t < task.num_tables(); ++t) {
    Decision d;
    d.table = t;
    d.decision = describe_decision(task, plan, t);
    d.cost_ms = predicted.cost_ms;
    // The plan without table t, and what t's shards held on each device.
    Plan rest;
    std::vector<int64_t> freed(task.num_devices(), 0);
    int whole_on = -1;
    for (const Shard& s : plan.shards) {
      if (s.table != t) {
        rest.shards.push_back(s);
        continue;
      }
      freed[s.device] += task.piece_bytes(s.table, s.rows, s.cols);
      if (!s.replica && s.rows == task.tables[t].rows && s.cols == task.tables[t].dim) {
        whole_on = s.device;
      }
    }
    const TableSpec& spec = task.tables[t];
    for (int dev : devices_to_try(task, predicted, plan, t, max_devices)) {
      if (dev == whole_on) continue;  // the decision itself
      if (task.pinned_device[t] >= 0 && task.pinned_device[t] != dev) continue;
      if (memory[dev] - freed[dev] + task.table_bytes(t) > task.device_mem_bytes[dev]) continue;
      Plan alt = rest;
      alt.shards.push_back({t, 0, spec.dim, 0, spec.rows, dev, false});
      const double ms = predict_plan(task, alt, costs).cost_ms;
      if (d.alternative.empty() || ms < d.alternative_ms) {
        d.alternative = fmt::format("whole on device {}", dev);
        d.alternative_ms = ms;
      }
    }
    if (d.alternative.empty()) {
      d.no_alternative = task.pinned_device[t] >= 0 ? fmt::format("pinned to device {}", task.pinned_device[t])
                         : task.num_devices() == 1 ? "no other device"
                                                   : "none fits in memory";
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string explain_report(const PlanTask& task, const std::vector<Decision>& decisions) {
  std::vector<const Decision*> order;
  for (const Decision& d : decisions) order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [](const Decision* a, const Decision* b) {
    return a->saving() > b->saving();
  });
  TextTable table({"table", "decision", "plan ms", "best alternative", "plan ms with it", "saves"});
  for (const Decision* d : order) {
    const bool none = d->alternative.empty();
    table.add_row({task.tables[d->table].name, d->decision, fmt::format("{:.3f}", d->cost_ms),
                   none ? d->no_alternative : d->alternative,
                   none ? "-" : fmt::format("{:.3f}", d->alternative_ms),
                   none ? "-" : fmt::format("{:+.1f}%", 100.0 * d->saving())});
  }
  return "why: each table's decision against its best single alternative, both predicted as "
         "whole plans by the cost model\n" +
         table.render();
}

}  // namespace embshard
