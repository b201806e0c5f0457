// `embshard bench kernel`: embshard's TBE kernels vs libtorch, FBGEMM and memcpy.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "options.h"
#include "embshard/bench/kernel_bench.h"
#include "embshard/util/reporter.h"

namespace embshard::cli {

void add_bench_kernel_command(CLI::App& bench) {
  auto options = std::make_shared<KernelBenchOptions>();
  auto json = std::make_shared<bool>(false);
  auto no_fbgemm = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "kernel",
      "Time the fused TBE kernels against libtorch's embedding_bag, FBGEMM's CPU TBE and memcpy");
  cmd->add_flag("--quick", options->quick, "Smaller cases and fewer runs (< 60 s)");
  cmd->add_flag("--json", *json, "Print a JSON object instead of the table");
  cmd->add_flag("--no-fbgemm", *no_fbgemm,
                "Leave out FBGEMM's kernels (run by default where a TorchRec Python is found)");
  cmd->add_option("--threads", options->threads, "Threads for every implementation")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_seed_option(cmd, options->seed, "Seed of the generated cases");
  cmd->callback([options, json, no_fbgemm] {
    KernelBenchOptions o = *options;
    o.warmup_runs = o.quick ? 2 : 3;
    o.timed_runs = o.quick ? 5 : 15;
    std::vector<std::unique_ptr<KernelPeer>> owned;
    std::vector<std::string> missing;
#ifdef EMBSHARD_WITH_TORCH  // the one place that knows whether libtorch is linked
    owned.push_back(make_torch_kernel_peer(o.threads));
#else
    missing.push_back("libtorch: not in this build (embshard-torch runs it)");
#endif
    if (*no_fbgemm) {
      missing.push_back("FBGEMM: left out (--no-fbgemm)");
    } else {
      FbgemmPeerOptions f;
      f.threads = o.threads;
      std::string why_not;
      if (auto peer = make_fbgemm_kernel_peer(f, &why_not)) {
        owned.push_back(std::move(peer));
      } else {
        missing.push_back("FBGEMM: not run: " + why_not);
        stderr_reporter().note("bench kernel: FBGEMM's kernels not run: " + why_not);
      }
    }
    std::vector<KernelPeer*> peers;
    for (auto& p : owned) peers.push_back(p.get());
    KernelBenchReport report = run_kernel_bench(o, peers, stderr_reporter());
    report.missing_peers = missing;
    if (*json) {
      std::printf("%s\n", kernel_report_to_json(report).dump(2).c_str());
    } else {
      std::printf("%s", format_kernel_report(report).c_str());
    }
  });
}

}  // namespace embshard::cli
