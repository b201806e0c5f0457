// `bench kernel` output: a readable table and a JSON object.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "bench/kernel_bench_internal.h"
#include "embshard/bench/kernel_bench.h"

namespace embshard {
namespace {

std::string op_title(KernelOp op, const std::string& impl) {
  const bool ours = impl == "embshard";
  switch (op) {
    case KernelOp::kForward: return impl + " forward";
    case KernelOp::kTrainSgd:
      return impl + (impl == "libtorch" ? " fwd+sparse bwd+SGD step"
                                        : ours ? " fwd+bwd+SGD update" : " fwd+bwd+fused SGD");
    case KernelOp::kTrainRowWiseAdagrad:
      return impl + (ours ? " fwd+bwd+row-wise Adagrad" : " fwd+bwd+fused row-wise Adagrad");
  }
  return impl;
}

std::string row(const std::string& title, double ms, double speedup, const KernelCaseResult& r) {
  const std::string ratio = speedup > 0.0 ? fmt::format("{:.2f}x", speedup) : "";
  return fmt::format("  {:<42} {:>10.3f} {:>14.2f} {:>12}\n", title, ms, r.gb_per_s(ms), ratio);
}

std::string numerics_line(const ImplResult& p) {
  std::string s = fmt::format("  {} checked against embshard first: forward within {:.2g}",
                              p.name, p.forward_max_abs_diff);
  const double sgd = p.update_max_rel_diff[static_cast<int>(KernelOp::kTrainSgd)];
  const double ada = p.update_max_rel_diff[static_cast<int>(KernelOp::kTrainRowWiseAdagrad)];
  if (sgd >= 0.0) s += fmt::format(", SGD updates within {:.2g}", sgd);
  if (ada >= 0.0) s += fmt::format(", Adagrad updates within {:.2g}", ada);
  return s + (sgd >= 0.0 || ada >= 0.0 ? " of the largest update\n" : "\n");
}

std::string format_case(const KernelCaseResult& r) {
  std::string s = fmt::format("case {}: {}\n", r.name, r.description);
  s += fmt::format("  {} lookups, {:.1f} MiB of rows gathered per batch, {:.1f} MiB of weights\n",
                   r.lookups, r.gathered_bytes / (1 << 20), r.weight_bytes / (1 << 20));
  s += fmt::format("  {:<42} {:>10} {:>14} {:>12}\n", "implementation", "median ms",
                   "GB/s gathered", "speedup");
  for (KernelOp op : kKernelOps) {
    if (!r.ours.ran(op)) continue;
    s += row(op_title(op, "embshard"), r.ours.ms_of(op), -1.0, r);
    for (const ImplResult& p : r.peers) {
      if (p.ran(op)) s += row(op_title(op, p.name), p.ms_of(op), p.speedup_of(op), r);
    }
  }
  for (const ImplResult& p : r.peers) {
    if (p.forward_max_abs_diff >= 0.0) s += numerics_line(p);
  }
  s += fmt::format("  embshard forward at {:.0f}% of memcpy bandwidth\n",
                   100.0 * r.fwd_fraction_of_memcpy());
  return s;
}

// JSON keys of a peer's figures: "torch" for libtorch (the keys this
// command has always had), else the peer's name in lower case.
std::string peer_key(const std::string& name) {
  if (name == "libtorch") return "torch";
  std::string key = name;
  for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return key;
}

nlohmann::json or_null(double v) { return v >= 0.0 ? nlohmann::json(v) : nlohmann::json(); }

void add_peer_json(nlohmann::json& c, const std::string& key, const ImplResult* p) {
  const ImplResult none;
  const ImplResult& q = p != nullptr ? *p : none;
  const int fwd = static_cast<int>(KernelOp::kForward);
  const int sgd = static_cast<int>(KernelOp::kTrainSgd);
  const int ada = static_cast<int>(KernelOp::kTrainRowWiseAdagrad);
  c[key + "_fwd_ms"] = or_null(q.ms[fwd]);
  c[key + "_train_ms"] = or_null(q.ms[sgd]);
  c["fwd_speedup_vs_" + key] = or_null(q.speedup[fwd]);
  c["train_speedup_vs_" + key] = or_null(q.speedup[sgd]);
  c[key + "_fwd_max_abs_diff"] = or_null(q.forward_max_abs_diff);
  if (key == "torch") return;  // libtorch: SGD only, its update unchecked
  c[key + "_train_adagrad_ms"] = or_null(q.ms[ada]);
  c["train_adagrad_speedup_vs_" + key] = or_null(q.speedup[ada]);
  c[key + "_sgd_update_max_rel_diff"] = or_null(q.update_max_rel_diff[sgd]);
  c[key + "_adagrad_update_max_rel_diff"] = or_null(q.update_max_rel_diff[ada]);
}

nlohmann::json types_json(const KernelBenchReport& report) {
  nlohmann::json types = nlohmann::json::array();
  for (const KernelTypeResult& r : report.types) {
    types.push_back({{"type", data_type_name(r.type)},
                     {"row_bytes", r.row_bytes},
                     {"fwd_ms", r.fwd_ms},
                     {"fwd_gb_per_s", r.fwd_gb_per_s()},
                     {"fwd_speedup_over_fp32", r.fwd_speedup},
                     {"fwd_fraction_of_memcpy", r.fwd_gb_per_s() / report.memcpy_gb_per_s},
                     {"train_adagrad_ms", or_null(r.step_ms)},
                     {"train_speedup_over_fp32", or_null(r.step_speedup)}});
  }
  return {{"case", report.types_description}, {"types", types}};
}

}  // namespace

std::string format_kernel_report(const KernelBenchReport& report) {
  std::string s = fmt::format(
      "bench kernel: {} thread(s){}; per case, {} rounds after {} warm-up, each running every "
      "implementation once in a rotating order after a cache flush;\nmedians over the rounds; "
      "speedup = median over rounds of (peer ms / embshard ms) in the same round, > 1 where "
      "embshard is faster\n",
      report.threads, report.quick ? ", quick" : "", report.timed_runs, report.warmup_runs);
  s += fmt::format("memcpy: {:.2f} GB/s (one direction, {:.0f} MiB buffer, bytes copied once)\n",
                   report.memcpy_gb_per_s, report.memcpy_buffer_bytes / (1 << 20));
  for (size_t k = 0; k < report.peer_names.size(); ++k) {
    const std::string about = k < report.peer_about.size() ? report.peer_about[k] : "";
    s += fmt::format("peer {}{}{}\n", report.peer_names[k], about.empty() ? "" : ": ", about);
  }
  s += "\n";
  for (const KernelCaseResult& r : report.cases) s += format_case(r) + "\n";
  s += format_kernel_types(report);
  for (const std::string& line : report.missing_peers) s += "(" + line + ")\n";
  return s;
}

nlohmann::json kernel_report_to_json(const KernelBenchReport& report) {
  // Every known peer's keys appear in every case, null where it did not run.
  std::vector<std::string> keys = {"torch", "fbgemm"};
  for (const std::string& name : report.peer_names) {
    if (std::find(keys.begin(), keys.end(), peer_key(name)) == keys.end()) {
      keys.push_back(peer_key(name));
    }
  }
  nlohmann::json cases = nlohmann::json::object();
  for (const KernelCaseResult& r : report.cases) {
    const int fwd = static_cast<int>(KernelOp::kForward);
    nlohmann::json c = {
        {"description", r.description},
        {"batch_size", r.batch_size},
        {"num_tables", r.num_tables},
        {"lookups", r.lookups},
        {"gathered_bytes", r.gathered_bytes},
        {"weight_bytes", r.weight_bytes},
        {"ours_fwd_ms", r.ours.ms[fwd]},
        {"ours_train_ms", r.ours.ms[static_cast<int>(KernelOp::kTrainSgd)]},
        {"ours_train_adagrad_ms", r.ours.ms[static_cast<int>(KernelOp::kTrainRowWiseAdagrad)]},
        {"ours_fwd_gb_per_s", r.gb_per_s(r.ours.ms[fwd])},
        {"fwd_fraction_of_memcpy", r.fwd_fraction_of_memcpy()},
    };
    for (const std::string& key : keys) {
      const ImplResult* found = nullptr;
      for (const ImplResult& p : r.peers) {
        if (peer_key(p.name) == key) found = &p;
      }
      add_peer_json(c, key, found);
    }
    cases[r.name] = std::move(c);
  }
  return {{"threads", report.threads},
          {"quick", report.quick},
          {"warmup_runs", report.warmup_runs},
          {"timed_runs", report.timed_runs},
          {"peers", report.peer_names},
          {"peer_about", report.peer_about},
          {"missing_peers", report.missing_peers},
          {"memcpy_gb_per_s", report.memcpy_gb_per_s},
          {"memcpy_buffer_bytes", report.memcpy_buffer_bytes},
          {"cases", std::move(cases)},
          {"data_types", types_json(report)}};
}

}  // namespace embshard
