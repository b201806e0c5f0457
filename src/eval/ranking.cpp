#include "embshard/eval/ranking.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "embshard/plan/plan.h"
#include "embshard/plan/predict.h"
#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

std::vector<TableSpec> draw_tables(const Workload& w, const RankingOptions& o,
                                   std::mt19937_64& rng) {
  const int pool = static_cast<int>(w.tables.size());
  const int count = std::min(pool, std::uniform_int_distribution<int>(o.min_tables,
                                                                      o.max_tables)(rng));
  std::vector<int> order(pool);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<TableSpec> tables;
  std::uniform_int_distribution<size_t> pick_dim(0, o.dims.size() - 1);
  for (int i = 0; i < pool && static_cast<int>(tables.size()) < count; ++i) {
    TableSpec t = w.tables[order[i]];
    t.dim = o.dims[pick_dim(rng)];
    if (t.weight_bytes() <= o.max_table_bytes) tables.push_back(std::move(t));
  }
  ES_CHECK(!tables.empty(), "ranking: no table of '{}' fits {} bytes at the drawn dims", w.dir,
           o.max_table_bytes);
  return tables;
}

// Memory per device: `headroom` x an even split, and at least the largest
// table (table-wise placements need room for it somewhere).
PlanTask make_ranking_task(std::vector<TableSpec> tables, int64_t batch_size, int devices,
                           double headroom) {
  int64_t cap = default_device_capacity(tables, devices, headroom);
  const MemoryModel memory;
  for (const TableSpec& t : tables)
    cap = std::max(cap, memory.shard_bytes(t.data_type, t.rows, t.dim));
  return make_task(std::move(tables), batch_size, device_capacities(devices, cap, {}), {});
}

// A random table-wise placement within the memory caps: tables largest
// first, each to a device drawn among those with room (a random first-fit
// decreasing, so that tight caps still leave many placements). False when a
// table finds no room.
bool draw_placement(const PlanTask& task, std::mt19937_64& rng, Plan& plan) {
  std::vector<int64_t> free_bytes = task.device_mem_bytes;
  std::vector<int> order(task.num_tables());
  std::iota(order.begin(), order.end(), 0);
  auto bytes = [&](int t) { return task.table_bytes(t); };
  std::shuffle(order.begin(), order.end(), rng);  // random order among equal sizes
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bytes(a) > bytes(b); });
  plan.shards.clear();
  std::vector<int> room;
  for (int t : order) {
    room.clear();
    for (int d = 0; d < task.num_devices(); ++d) {
      if (free_bytes[d] >= bytes(t)) room.push_back(d);
    }
    if (room.empty()) return false;
    const int device = room[std::uniform_int_distribution<size_t>(0, room.size() - 1)(rng)];
    free_bytes[device] -= bytes(t);
    plan.shards.push_back({t, 0, task.tables[t].dim, 0, task.tables[t].rows, device, false});
  }
  return true;
}

}  // namespace

RankingResult ranking_check(const CostModel& model, std::shared_ptr<ComputeModel> measured,
                            const Workload& workload, const RankingOptions& o,
                            Reporter& reporter) {
  ES_CHECK(o.tasks >= 1 && o.placements >= 2 && o.devices >= 1,
           "ranking: tasks {} placements {} devices {}: need >= 1, >= 2, >= 1", o.tasks,
           o.placements, o.devices);
  ES_CHECK(o.min_tables >= 1 && o.max_tables >= o.min_tables && !o.dims.empty(),
           "ranking: tables {}..{} or dims invalid", o.min_tables, o.max_tables);
  // Both sides take communication from the model under test (see above).
  const CostModel truth{std::move(measured), model.comm, "measured compute", ModelSource{}};
  RankingResult result;
  Progress progress(reporter, "validate --ranking", static_cast<uint64_t>(o.tasks));
  for (int i = 0; i < o.tasks; ++i) {
    std::mt19937_64 rng(item_seed(o.seed, static_cast<uint64_t>(i)));
    const std::vector<TableSpec> tables = draw_tables(workload, o, rng);
    // Where the caps leave fewer than two placements, loosen them by 25% steps.
    std::vector<Plan> plans;
    PlanTask task;
    for (double headroom = o.mem_headroom; plans.size() < 2 && headroom < 8 * o.mem_headroom;
         headroom *= 1.25) {
      task = make_ranking_task(tables, workload.batch_size, o.devices, headroom);
      plans.clear();
      Plan plan;
      for (int tries = 0; static_cast<int>(plans.size()) < o.placements &&
                          tries < 20 * o.placements;
           ++tries) {
        if (draw_placement(task, rng, plan)) plans.push_back(plan);
      }
    }
    ShardCosts predicted_costs(task, model);
    ShardCosts measured_costs(task, truth);
    RankingTask r;
    r.tables = task.num_tables();
    for (const Plan& plan : plans) {
      validate_plan(task, plan);
      r.predicted_ms.push_back(predict_plan(task, plan, predicted_costs).cost_ms);
      r.measured_ms.push_back(predict_plan(task, plan, measured_costs).cost_ms);
    }
    ES_CHECK(r.measured_ms.size() >= 2, "ranking: task {} has no two feasible placements", i);
    auto argmin = [](const std::vector<double>& v) {
      return static_cast<int>(std::min_element(v.begin(), v.end()) - v.begin());
    };
    r.pick = argmin(r.predicted_ms);
    r.best = argmin(r.measured_ms);
    r.regret = r.measured_ms[r.pick] / r.measured_ms[r.best] - 1;
    result.hits += r.regret <= o.tolerance ? 1 : 0;
    result.mean_regret += r.regret / o.tasks;
    result.tasks.push_back(std::move(r));
    progress.update(static_cast<uint64_t>(i + 1));
  }
  progress.finish();
  result.pick_within_tolerance_rate = static_cast<double>(result.hits) / o.tasks;
  return result;
}

}  // namespace embshard
