// embshard bench compute | kernel | comm | plan
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/bench/compute.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"

namespace embshard::cli {
namespace {

struct ComputeArgs {
  ComputeBenchOptions options;
  std::string optimizer = "rowwise_adagrad";
  int64_t show = 12;
};

}  // namespace

// The last `show` records of a cost file as a table.
void print_compute_records(const std::string& path, int64_t show) {
  nlohmann::json header;
  const auto records = RecordFile::read_all(path, &header, nullptr);
  TextTable table({"sample", "tables", "dims", "rows", "pooling", "weights MB", "fwd ms",
                   "bwd+upd ms", "total ms"});
  const size_t first = records.size() > static_cast<size_t>(show) ? records.size() - show : 0;
  for (size_t i = first; i < records.size(); ++i) {
    const auto& r = records[i];
    std::string dims;
    int64_t rows = 0;
    double pooling = 0, bytes = 0;
    for (const auto& t : r["tables"]) {
      dims += (dims.empty() ? "" : ",") + std::to_string(t["dim"].get<int>());
      rows += t["rows"].get<int64_t>();
      pooling += t["pooling_factor"].get<double>();
      bytes += t["rows"].get<double>() * t["dim"].get<double>() * 4;
    }
    if (dims.size() > 28) dims = dims.substr(0, 25) + "...";
    table.add_row({std::to_string(r["sample"].get<int64_t>()),
                   std::to_string(r["tables"].size()), dims, std::to_string(rows),
                   fmt::format("{:.1f}", pooling), fmt::format("{:.1f}", bytes / 1e6),
                   fmt::format("{:.3f}", r["fwd_ms"].get<double>()),
                   fmt::format("{:.3f}", r["bwd_ms"].get<double>()),
                   fmt::format("{:.3f}", r["ms"].get<double>())});
  }
  fmt::print("{} shard costs in {} (batch {}, {} thread(s), median of {} runs after {} "
             "warm-up){}\n",
             records.size(), path, header.value("batch_size", 0), header.value("threads", 0),
             header.value("repeats", 0), header.value("warmup", 0),
             first > 0 ? fmt::format("; the last {}:", records.size() - first) : ":");
  fmt::print("{}", table.render());
}

namespace {

void add_compute_command(CLI::App& bench) {
  auto args = std::make_shared<ComputeArgs>();
  ComputeBenchOptions& o = args->options;
  CLI::App* cmd = bench.add_subcommand(
      "compute", "Measure forward+backward+update of random shards on the fused executor");
  cmd->add_option("--workload", o.workload_dir, "Workload directory (tables.json + trace.bin)")
      ->required();
  cmd->add_option("--samples", o.samples, "Number of shards to measure (total, resumes)")
      ->required();
  cmd->add_option("--out", o.out_path, "Output file (JSON lines; appended, resumable)")
      ->required();
  cmd->add_option("--max-tables", o.max_tables, "Tables per shard: 1..K")->capture_default_str();
  cmd->add_option("--mem-cap", o.mem_cap_bytes, "Weight bytes per shard at most")
      ->capture_default_str();
  cmd->add_option("--dims", o.dims, "Dims a table is augmented to")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--threads", o.threads, "Threads of the executor (a device)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the shard draws")->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Untimed runs per shard")->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Timed runs per shard (median)")
      ->capture_default_str();
  cmd->add_option("--optimizer", args->optimizer, "sgd | rowwise_adagrad")
      ->check(CLI::IsMember({"sgd", "rowwise_adagrad"}))
      ->capture_default_str();
  cmd->add_option("--show", args->show, "Records to print at the end")->capture_default_str();
  cmd->callback([args] {
    args->options.optimizer = args->optimizer == "sgd" ? OptimizerType::kSgd
                                                       : OptimizerType::kRowWiseAdagrad;
    run_compute_bench(args->options);
    print_compute_records(args->options.out_path, args->show);
  });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure costs on this machine");
  bench->require_subcommand(1);
  add_compute_command(*bench);
  add_bench_kernel_command(*bench);
  add_bench_comm_command(*bench);
  add_bench_plan_command(*bench);
  add_bench_cost_model_command(*bench);
}

}  // namespace embshard::cli
