// `embshard bench kernel`: embshard's TBE kernels vs libtorch and memcpy.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "embshard/bench/kernel_bench.h"
#include "embshard/util/reporter.h"

namespace embshard::cli {

void add_bench_kernel_command(CLI::App& bench) {
  auto options = std::make_shared<KernelBenchOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "kernel", "Time the fused TBE kernels against libtorch's embedding_bag and memcpy");
  cmd->add_flag("--quick", options->quick, "Smaller cases and fewer runs (< 60 s)");
  cmd->add_flag("--json", *json, "Print a JSON object instead of the table");
  cmd->add_option("--threads", options->threads, "Threads for every implementation")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_seed_option(cmd, options->seed, "Seed of the generated cases");
  cmd->callback([options, json] {
    KernelBenchOptions o = *options;
    o.warmup_runs = o.quick ? 2 : 3;
    o.timed_runs = o.quick ? 5 : 15;
    std::unique_ptr<KernelPeer> peer;
#ifdef EMBSHARD_WITH_TORCH  // the one place that knows whether libtorch is linked
    peer = make_torch_kernel_peer(o.threads);
#endif
    const KernelBenchReport report = run_kernel_bench(o, peer.get(), stderr_reporter());
    if (*json) {
      std::printf("%s\n", kernel_report_to_json(report).dump(2).c_str());
    } else {
      std::printf("%s", format_kernel_report(report).c_str());
    }
  });
}

}  // namespace embshard::cli
