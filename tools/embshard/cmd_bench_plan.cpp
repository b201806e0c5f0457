// embshard bench plan: how long the planner's search takes at the task sizes
// the reference (Python) implementation was timed at, and at 1,000 tables on
// 64 devices.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "embshard/plan/table_input.h"
#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/text_table.h"

namespace embshard::cli {
namespace {

struct BenchPlanArgs {
  std::vector<std::string> sizes = {"50x4", "100x8", "1000x64"};
  std::vector<std::string> cost_models = {"analytic", "neural"};
  std::string model_dir = shipped_models_dir() + "/neural";
  std::string algo = "neuroshard";
  int repeats = 3;
  uint64_t seed = 1;
  double mem_slack = 1.3;
  PlannerOptions planner;
};

// The reference implementation's seconds per task (issue 4), where known.
double reference_s(int tables, int devices) {
  if (tables == 50 && devices == 4) return 5.6;
  if (tables == 100 && devices == 8) return 11.2;
  return 0;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux: kilobytes
}

PlanTask bench_task(int tables, int devices, const BenchPlanArgs& a) {
  PlanTables in = default_plan_tables(tables, 4096, a.seed);
  MemoryModel m;
  int64_t total = 0, largest = 0;
  for (const TableSpec& t : in.tables) {
    total += m.shard_bytes(t.rows, t.dim);
    largest = std::max(largest, m.shard_bytes(t.rows, t.dim));
  }
  // Memory binds (30% over an even share) but every table fits whole.
  const int64_t cap = std::max<int64_t>(static_cast<int64_t>(a.mem_slack * total / devices),
                                        largest + 1);
  return make_task(std::move(in.tables), in.batch_size, std::vector<int64_t>(devices, cap), {});
}

void run_bench_plan(const BenchPlanArgs& a) {
  ES_CHECK(a.repeats >= 1, "--repeats is {}, must be at least 1", a.repeats);
  TextTable table({"tables", "devices", "cost model", "algo", "search s (median)", "min s",
                   "reference s", "speedup", "cost ms", "gap %", "peak RSS MB"});
  for (const std::string& model_name : a.cost_models) {
    if (model_name == "neural" && !std::filesystem::exists(a.model_dir)) {
      fmt::print("skipping the neural cost model: no model directory {}\n", a.model_dir);
      continue;
    }
    for (const std::string& size : a.sizes) {
      int tables = 0, devices = 0;
      ES_CHECK(std::sscanf(size.c_str(), "%dx%d", &tables, &devices) == 2 && tables > 0 &&
                   devices > 0,
               "--sizes entry '{}': expected TABLESxDEVICES, e.g. 100x8", size);
      const PlanTask task = bench_task(tables, devices, a);
      std::vector<double> seconds;
      PlanResult last;
      for (int r = 0; r < a.repeats; ++r) {
        // A fresh model per run: nothing cached from the previous run.
        CostModelOptions o;
        o.model_dir = a.model_dir;
        o.batch_size = task.batch_size;
        auto model = create_cost_model(model_name, o);
        auto planner = create_planner(a.algo, a.planner);
        last = make_plan(*planner, task, *model);
        seconds.push_back(last.search_s);
      }
      std::sort(seconds.begin(), seconds.end());
      const double median = seconds[seconds.size() / 2];
      const double ref = reference_s(tables, devices);
      table.add_row({std::to_string(tables), std::to_string(devices), last.cost_model, a.algo,
                     fmt::format("{:.4f}", median), fmt::format("{:.4f}", seconds.front()),
                     ref > 0 ? fmt::format("{:.1f}", ref) : "-",
                     ref > 0 ? fmt::format("{:.0f}x", ref / median) : "-",
                     fmt::format("{:.3f}", last.predicted.cost_ms),
                     fmt::format("{:.1f}", 100 * last.gap()), fmt::format("{:.0f}", peak_rss_mb())});
      std::fprintf(stderr, "bench plan: %s %s done\n", model_name.c_str(), size.c_str());
    }
  }
  fmt::print("{}", table.render());
  fmt::print("search parameters: beam width {}, max steps {}, candidates {}, grid steps {}; "
             "{} search thread(s); memory {:.2f} x an even share; {} run(s) per size; peak RSS "
             "is the whole process's so far\n",
             a.planner.beam_width, a.planner.max_steps, a.planner.candidates,
             a.planner.grid_steps,
             a.planner.threads > 0 ? a.planner.threads : std::thread::hardware_concurrency(),
             a.mem_slack, a.repeats);
}

}  // namespace

void add_bench_plan_command(CLI::App& bench) {
  auto a = std::make_shared<BenchPlanArgs>();
  CLI::App* cmd = bench.add_subcommand("plan", "Time the planner's search at several task sizes");
  cmd->add_option("--sizes", a->sizes, "TABLESxDEVICES list")->delimiter(',')->capture_default_str();
  cmd->add_option("--cost-models", a->cost_models, "Cost models (neural skipped without models)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--model", a->model_dir, "Neural model directory")->capture_default_str();
  cmd->add_option("--algo", a->algo, "Planner")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Runs per size (median reported)")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the synthetic tables")->capture_default_str();
  cmd->add_option("--threads", a->planner.threads, "Search threads (0: one per hardware thread)")
      ->capture_default_str();
  cmd->add_option("--mem-slack", a->mem_slack, "Device memory as a multiple of an even share")
      ->capture_default_str();
  cmd->callback([a] { run_bench_plan(*a); });
}

}  // namespace embshard::cli
