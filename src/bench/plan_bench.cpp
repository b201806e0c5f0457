// `embshard bench plan`: the planner's search time at several task sizes.
#include "embshard/bench/plan_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/plan/plan.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/text_table.h"
#include "embshard/workload/table.h"
#include "embshard/workload/table_specs.h"

namespace embshard {
namespace {

// Resets the process's peak resident memory to its current one; false where
// the kernel does not allow it (the peak is then the process's so far).
bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

double peak_rss_mb() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long kb = -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    }
    std::fclose(f);
    if (kb >= 0) return kb / 1024.0;
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux: kilobytes
}

// A compute model that counts its costings (compute_ms and state_ms calls).
class CountingCompute : public ComputeModel {
 public:
  explicit CountingCompute(std::shared_ptr<ComputeModel> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  int64_t batch_size() const override { return inner_->batch_size(); }
  int add_table(const TableFeatures& table) override { return inner_->add_table(table); }
  double compute_ms(std::span<const int> ids) const override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    return inner_->compute_ms(ids);
  }
  size_t state_size() const override { return inner_->state_size(); }
  void add_to_state(int id, std::span<double> state) const override {
    inner_->add_to_state(id, state);
  }
  double state_ms(std::span<const double> state) const override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    return inner_->state_ms(state);
  }
  uint64_t calls() const { return calls_.load(); }

 private:
  std::shared_ptr<ComputeModel> inner_;
  mutable std::atomic<uint64_t> calls_{0};
};

std::pair<int, int> parse_size(const std::string& size) {
  long long tables = 0, devices = 0;  // wide, so that a huge count is named, not wrapped
  char tail = 0;
  ES_CHECK(std::sscanf(size.c_str(), "%lldx%lld%c", &tables, &devices, &tail) == 2 &&
               tables > 0 && devices > 0,
           "bench plan: --sizes entry '{}': expected TABLESxDEVICES, e.g. 100x8", size);
  ES_CHECK(tables <= kMaxTables && devices <= kMaxDevices,
           "bench plan: --sizes entry '{}': at most {} tables and {} devices", size, kMaxTables,
           kMaxDevices);
  return {static_cast<int>(tables), static_cast<int>(devices)};
}

PlanTask bench_task(int tables, int devices, const PlanBenchOptions& o) {
  Workload w = default_workload(tables, 4096, o.seed);
  MemoryModel m;
  int64_t total = 0, largest = 0;
  for (const TableSpec& t : w.tables) {
    total += m.shard_bytes(t.data_type, t.rows, t.dim);
    largest = std::max(largest, m.shard_bytes(t.data_type, t.rows, t.dim));
  }
  // Memory binds (30% over an even share) but every table fits whole.
  const int64_t cap = std::max<int64_t>(static_cast<int64_t>(o.mem_slack * total / devices),
                                        largest + 1);
  TaskConstraints constraints;
  constraints.types = o.types;
  PlanTask task = make_task(std::move(w.tables), w.batch_size,
                            std::vector<int64_t>(devices, cap), constraints);
  task.topology = o.topology;
  return task;
}

// One planner's runs at one size: the median search time, the last run's
// plan, and the peak memory while they ran.
PlanBenchRow bench_one(const PlanTask& task, const std::string& model_name, const std::string& algo,
                       const PlanBenchOptions& o, Reporter& reporter) {
  const bool reset = reset_peak_rss();
  std::vector<double> seconds;
  PlanResult last;
  uint64_t calls = 0;
  for (int r = 0; r < o.repeats; ++r) {
    // A fresh model per run: nothing cached from the previous run.
    CostModelOptions mo;
    mo.model_dir = o.model_dir;
    mo.batch_size = task.batch_size;
    CostModel model = open_cost_model(model_name, mo, r == 0 ? reporter : silent_reporter());
    const auto counting = std::make_shared<CountingCompute>(model.compute);
    model.compute = counting;
    last = plan_task(task, algo, o.planner, model);
    seconds.push_back(last.search_s);
    calls = counting->calls();
  }
  std::sort(seconds.begin(), seconds.end());
  return {task.num_tables(),
          task.num_devices(),
          last.cost_model,
          algo,
          seconds[seconds.size() / 2],
          seconds.front(),
          last.predicted.cost_ms,
          last.gap(),
          calls,
          peak_rss_mb(),
          reset};
}

// The hosts, as each size has them ("one host" where flat).
std::string hosts(const Topology& t) {
  if (t.devices_per_host <= 0) return "one host";
  return fmt::format("hosts of {} devices, {:g} GB/s and {:g} us between hosts",
                     t.devices_per_host, t.inter_host_gbps, t.inter_host_latency_us);
}

}  // namespace

std::vector<PlanBenchRow> run_plan_bench(const PlanBenchOptions& o, Reporter& reporter) {
  ES_CHECK(o.repeats >= 1, "bench plan: --repeats is {}, must be at least 1", o.repeats);
  ES_CHECK(std::isfinite(o.mem_slack) && o.mem_slack >= 1 && o.mem_slack <= 1000,
           "bench plan: --mem-slack is {}, must be in 1..1000 (device memory as a multiple of an "
           "even share: below 1 the tables cannot fit)",
           o.mem_slack);
  for (const std::string& size : o.sizes) check_topology(o.topology, parse_size(size).second);
  ES_CHECK(!o.algos.empty(), "bench plan: --algo names no planner");
  for (const std::string& algo : o.algos) {
    ES_CHECK(std::ranges::find(planner_names(), algo) != planner_names().end(),
             "bench plan: --algo '{}' is no planner (one of: {})", algo,
             fmt::join(planner_names(), ", "));
    check_policy_use(algo, o.planner);
  }
  for (const std::string& name : o.cost_models) {
    ES_CHECK(name != "measured",
             "bench plan: --cost-models measured executes a workload's traces, and bench plan's "
             "tables are synthetic specs without one: time it with `plan WORKLOAD "
             "--cost-model measured`");
  }
  std::vector<PlanBenchRow> rows;
  for (const std::string& model_name : o.cost_models) {
    for (const std::string& size : o.sizes) {
      const auto [tables, devices] = parse_size(size);
      const PlanTask task = bench_task(tables, devices, o);
      for (const std::string& algo : o.algos) {
        rows.push_back(bench_one(task, model_name, algo, o, reporter));
        reporter.note(fmt::format("bench plan: {} {} {} done", model_name, size, algo));
      }
    }
  }
  return rows;
}

std::string plan_bench_report(const std::vector<PlanBenchRow>& rows, const PlanBenchOptions& o) {
  TextTable table({"tables", "devices", "cost model", "algo", "search s (median)", "min s",
                   "cost ms", "gap %", "model calls", "peak RSS MB"});
  for (const PlanBenchRow& r : rows) {
    table.add_row({std::to_string(r.tables), std::to_string(r.devices), r.cost_model, r.algo,
                   fmt::format("{:.4f}", r.median_s), fmt::format("{:.4f}", r.min_s),
                   fmt::format("{:.3f}", r.cost_ms), fmt::format("{:.1f}", 100 * r.gap),
                   std::to_string(r.model_calls), fmt::format("{:.0f}", r.peak_rss_mb)});
  }
  const int threads =
      o.planner.threads > 0 ? o.planner.threads : static_cast<int>(std::thread::hardware_concurrency());
  return table.render() +
         fmt::format(
             "search parameters: beam width {}, max steps {} (step patience {}), "
             "candidates {}, grid steps {} (screen: the parent's cap, keep {} x beam width), "
             "scan patience {}; {} search thread(s); memory {:.2f} x an even share; {} "
             "run(s) per size; {}; peak RSS {}\n",
             o.planner.budget.beam_width, o.planner.budget.max_steps,
             o.planner.budget.step_patience, o.planner.budget.candidates,
             o.planner.budget.grid_steps, o.planner.budget.screen_keep,
             o.planner.budget.scan_patience, threads, o.mem_slack, o.repeats, hosts(o.topology),
             std::all_of(rows.begin(), rows.end(),
                         [](const PlanBenchRow& r) { return r.peak_reset; })
                 ? "the process's during each row's runs (its peak reset before them; the "
                   "tables and model count in it)"
                 : "the whole process's so far");
}

}  // namespace embshard
