// `bench kernel` output: a readable table and a JSON object.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "embshard/bench/kernel_bench.h"

namespace embshard {
namespace {

bool has_peer(const KernelCaseResult& r) { return r.peer_fwd_ms > 0.0 && r.peer_train_ms > 0.0; }

std::string row(const std::string& impl, double ms, const KernelCaseResult& r) {
  return fmt::format("  {:<34} {:>10.3f} {:>14.2f}\n", impl, ms, r.gb_per_s(ms));
}

std::string format_case(const KernelCaseResult& r, const std::string& peer) {
  std::string s = fmt::format("case {}: {}\n", r.name, r.description);
  s += fmt::format("  {} lookups, {:.1f} MiB of rows gathered per batch, {:.1f} MiB of weights\n",
                   r.lookups, r.gathered_bytes / (1 << 20), r.weight_bytes / (1 << 20));
  s += fmt::format("  {:<34} {:>10} {:>14}\n", "implementation", "median ms", "GB/s gathered");
  s += row("embshard forward", r.ours_fwd_ms, r);
  if (has_peer(r)) s += row(peer + " forward", r.peer_fwd_ms, r);
  s += row("embshard fwd+bwd+SGD update", r.ours_train_ms, r);
  if (has_peer(r)) s += row(peer + " fwd+sparse bwd+SGD step", r.peer_train_ms, r);
  if (has_peer(r)) {
    s += fmt::format("  forward speedup vs {}: {:.2f}x   fwd+bwd+update speedup: {:.2f}x\n", peer,
                     r.fwd_speedup(), r.train_speedup());
  }
  s += fmt::format("  embshard forward at {:.0f}% of memcpy bandwidth\n",
                   100.0 * r.fwd_fraction_of_memcpy());
  return s;
}

}  // namespace

std::string format_kernel_report(const KernelBenchReport& report) {
  std::string s = fmt::format(
      "bench kernel: {} thread(s){}, medians of interleaved timed runs after warm-up\n",
      report.threads, report.quick ? ", quick" : "");
  s += fmt::format("memcpy: {:.2f} GB/s (one direction, {:.0f} MiB buffer, bytes copied once)\n\n",
                   report.memcpy_gb_per_s, report.memcpy_buffer_bytes / (1 << 20));
  for (const KernelCaseResult& r : report.cases) {
    s += format_case(r, report.peer_name.empty() ? "peer" : report.peer_name) + "\n";
  }
  if (report.peer_name.empty()) s += "(no peer: built without libtorch)\n";
  return s;
}

nlohmann::json kernel_report_to_json(const KernelBenchReport& report) {
  nlohmann::json cases = nlohmann::json::object();
  for (const KernelCaseResult& r : report.cases) {
    const bool peer = has_peer(r);
    nlohmann::json c = {
        {"description", r.description},
        {"batch_size", r.batch_size},
        {"num_tables", r.num_tables},
        {"lookups", r.lookups},
        {"gathered_bytes", r.gathered_bytes},
        {"weight_bytes", r.weight_bytes},
        {"ours_fwd_ms", r.ours_fwd_ms},
        {"ours_train_ms", r.ours_train_ms},
        {"ours_fwd_gb_per_s", r.gb_per_s(r.ours_fwd_ms)},
        {"torch_fwd_ms", peer ? nlohmann::json(r.peer_fwd_ms) : nlohmann::json()},
        {"torch_train_ms", peer ? nlohmann::json(r.peer_train_ms) : nlohmann::json()},
        {"fwd_speedup_vs_torch", peer ? nlohmann::json(r.fwd_speedup()) : nlohmann::json()},
        {"train_speedup_vs_torch", peer ? nlohmann::json(r.train_speedup()) : nlohmann::json()},
        {"fwd_fraction_of_memcpy", r.fwd_fraction_of_memcpy()},
    };
    cases[r.name] = std::move(c);
  }
  return {{"threads", report.threads},
          {"quick", report.quick},
          {"peer", report.peer_name.empty() ? nlohmann::json() : nlohmann::json(report.peer_name)},
          {"memcpy_gb_per_s", report.memcpy_gb_per_s},
          {"memcpy_buffer_bytes", report.memcpy_buffer_bytes},
          {"cases", std::move(cases)}};
}

}  // namespace embshard
