// `embshard bench plan`: how long the planner's search takes at several task
// sizes (built-in default tables, memory 30% over an even share), the median
// of a few runs, each with a fresh cost model so that nothing is cached.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/plan/plan.h"
#include "embshard/cost/topology.h"
#include "embshard/search/planner.h"

namespace embshard {

class Reporter;

struct PlanBenchOptions {
  std::vector<std::string> sizes = {"50x4", "100x8", "1000x64"};  // TABLESxDEVICES
  std::vector<std::string> cost_models = {"analytic", "neural"};
  std::string model_dir;  // "": the shipped neural models
  std::vector<std::string> algos = {"neuroshard"};  // each at every size, side by side
  int repeats = 3;
  uint64_t seed = 1;       // of the synthetic tables
  double mem_slack = 1.3;  // device memory as a multiple of an even share
  PlannerOptions planner;
  ShardingTypes types;     // --sharding-types
  Topology topology;       // the devices' hosts (--devices-per-host ...); flat by default
};

struct PlanBenchRow {
  int tables = 0, devices = 0;
  std::string cost_model, algo;
  double median_s = 0, min_s = 0;
  double cost_ms = 0, gap = 0;
  // The compute model's costings in the last run (what the search's time
  // mostly is; deterministic with one thread).
  uint64_t model_calls = 0;
  // The process's peak resident memory during the size's runs (the peak is
  // reset before them where Linux lets it: /proc/self/clear_refs), else
  // the whole process's so far.
  double peak_rss_mb = 0;
  bool peak_reset = false;
};

// Error on a malformed size ("100x8" expected) before any run; progress to
// `reporter`.
std::vector<PlanBenchRow> run_plan_bench(const PlanBenchOptions& options, Reporter& reporter);
std::string plan_bench_report(const std::vector<PlanBenchRow>& rows,
                              const PlanBenchOptions& options);

}  // namespace embshard
