// embshard bench comm (run under mpirun, one rank per device)
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/bench/comm.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"

namespace embshard::cli {
namespace {

struct CommArgs {
  CommBenchOptions options;
  std::string test_kill_mode = "exit";
};

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string min_max(const nlohmann::json& values, const char* format) {
  const auto v = values.get<std::vector<double>>();
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return fmt::format(fmt::runtime(format), *lo) + ".." + fmt::format(fmt::runtime(format), *hi);
}

// The last `show` records of a comm cost file as a table, then the medians
// over all records of the slowest rank's forward and backward.
void print_comm_records(const std::string& path, int64_t show) {
  nlohmann::json header;
  const auto records = RecordFile::read_all(path, &header, nullptr);
  TextTable table({"sample", "tables", "dim sums", "max delay ms", "fwd ms (ranks)",
                   "bwd ms (ranks)"});
  const size_t first = records.size() > static_cast<size_t>(show) ? records.size() - show : 0;
  std::vector<double> max_fwd, max_bwd;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const auto fwd = r["fwd_ms"].get<std::vector<double>>();
    const auto bwd = r["bwd_ms"].get<std::vector<double>>();
    max_fwd.push_back(*std::max_element(fwd.begin(), fwd.end()));
    max_bwd.push_back(*std::max_element(bwd.begin(), bwd.end()));
    if (i < first) continue;
    int64_t tables = 0;
    for (const auto& t : r["num_tables"]) tables += t.get<int64_t>();
    const auto delays = r["delays_ms"].get<std::vector<double>>();
    table.add_row({std::to_string(r["sample"].get<int64_t>()), std::to_string(tables),
                   min_max(r["dim_sums"], "{:.0f}"),
                   fmt::format("{:.2f}", *std::max_element(delays.begin(), delays.end())),
                   min_max(r["fwd_ms"], "{:.3f}"), min_max(r["bwd_ms"], "{:.3f}")});
  }
  fmt::print("{} all-to-all costs in {} ({} ranks, batch {}, median of {} runs after {} "
             "warm-up){}\n",
             records.size(), path, header.value("num_devices", 0), header.value("batch", 0),
             header.value("repeats", 0), header.value("warmup", 0),
             first > 0 ? fmt::format("; the last {}:", records.size() - first) : ":");
  fmt::print("{}", table.render());
  fmt::print("median over samples of the slowest rank: fwd {:.3f} ms, bwd {:.3f} ms\n",
             median_of(max_fwd), median_of(max_bwd));
}

void add_test_hooks(CLI::App* cmd, CommArgs& args) {
  // Hidden (empty group): for the failure tests only.
  CommBenchOptions& o = args.options;
  cmd->add_option("--test-kill-rank", o.fault_rank, "Rank that fails (tests)")->group("");
  cmd->add_option("--test-kill-at-sample", o.fault_sample, "Sample it fails at (tests)")
      ->group("");
  cmd->add_option("--test-kill-mode", args.test_kill_mode, "exit | hang (tests)")
      ->check(CLI::IsMember({"exit", "hang"}))
      ->group("");
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto args = std::make_shared<CommArgs>();
  CommBenchOptions& o = args->options;
  CLI::App* cmd = bench.add_subcommand(
      "comm", "Measure forward/backward all-to-all costs (run under mpirun, one rank a device)");
  cmd->add_option("--samples", o.samples, "Number of samples to measure (total, resumes)")
      ->required();
  cmd->add_option("--out", o.out_path, "Output file, written by rank 0 (JSON lines; resumable)")
      ->required();
  cmd->add_option("--batch", o.batch, "Global batch; each rank holds batch/N rows")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the sample draws")->capture_default_str();
  cmd->add_option("--max-delay-ms", o.max_delay_ms, "Straggler delays: uniform 0..D ms")
      ->capture_default_str();
  cmd->add_option("--dims", o.dims, "Dims a table is drawn at")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tables-per-device", o.tables_per_device,
                  "MIN,MAX: a sample has N*MIN..N*MAX tables")
      ->delimiter(',')
      ->expected(2)
      ->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Untimed runs per sample")->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Timed runs per sample (median per rank)")
      ->capture_default_str();
  cmd->add_option("--timeout-s", o.timeout_s,
                  "Abort when any collective takes longer (a rank died or hangs)")
      ->capture_default_str();
  cmd->add_option("--show", o.show, "Records to print at the end")->capture_default_str();
  add_test_hooks(cmd, *args);
  cmd->callback([args] {
    CommBenchOptions& opts = args->options;
    if (opts.fault_rank >= 0) {
      opts.fault = args->test_kill_mode == "hang" ? CommFault::kHang : CommFault::kExit;
    }
    const CommBenchResult result = run_comm_bench(opts);
    // A follower whose run rank 0 refused: rank 0 has printed why.
    if (result.setup_failed) throw CLI::RuntimeError(1);
    if (result.rank == 0) print_comm_records(opts.out_path, opts.show);
  });
}

}  // namespace embshard::cli
