// The report's summary by host.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "embshard/plan/report.h"
#include "embshard/util/text_table.h"

namespace embshard {

std::vector<HostSummary> host_summaries(const PlanTask& task, const PlanPrediction& p) {
  const int n = task.num_devices();
  const Topology& t = task.topology;
  std::vector<double> dims(n);
  for (int d = 0; d < n; ++d) dims[d] = p.devices[d].dim_sum;
  const HostComm comm = host_comm(t, task.batch_size, dims, &p.collectives);
  std::vector<HostSummary> hosts(t.num_hosts(n));
  for (size_t h = 0; h < hosts.size(); ++h) {
    HostSummary& s = hosts[h];
    s.first_device = static_cast<int>(h) * t.devices_per_host;
    s.last_device = std::min(n, s.first_device + t.devices_per_host) - 1;
    s.slowest_device = s.first_device;
    for (int d = s.first_device; d <= s.last_device; ++d) {
      const DeviceCosts& c = p.devices[d];
      if (c.total_ms() > p.devices[s.slowest_device].total_ms()) s.slowest_device = d;
      s.memory_bytes += c.memory_bytes;
      s.dim_sum += c.dim_sum;
    }
    s.a2a_out_bytes = comm.a2a.out[h];
    s.a2a_in_bytes = comm.a2a.in[h];
    s.inter_host_fwd_ms = comm.fwd_ms[h];
    s.inter_host_bwd_ms = task.step == StepKind::kInference ? 0.0 : comm.bwd_ms[h];  // no backward
  }
  return hosts;
}

std::string host_report(const PlanTask& task, const PlanPrediction& p) {
  if (!task.topology.hierarchical(task.num_devices())) return "";
  const std::vector<HostSummary> hosts = host_summaries(task, p);
  std::vector<int> shown(hosts.size());
  std::iota(shown.begin(), shown.end(), 0);
  const size_t limit = 16;
  const bool cut = shown.size() > 2 * limit;
  const auto slowest_ms = [&](int h) { return p.devices[hosts[h].slowest_device].total_ms(); };
  if (cut) {
    std::stable_sort(shown.begin(), shown.end(),
                     [&](int a, int b) { return slowest_ms(a) > slowest_ms(b); });
    shown.resize(limit);
  }
  TextTable table({"host", "devices", "slowest device", "its total ms", "memory GB", "dim sum",
                   "a2a out MB", "a2a in MB", "inter-host fwd ms", "inter-host bwd ms"});
  for (int h : shown) {
    const HostSummary& s = hosts[h];
    table.add_row(
        {std::to_string(h), fmt::format("{}-{}", s.first_device, s.last_device),
         std::to_string(s.slowest_device), fmt::format("{:.3f}", slowest_ms(h)),
         fmt::format("{:.3f}", s.memory_bytes / 1e9), fmt::format("{:.0f}", s.dim_sum),
         fmt::format("{:.2f}", s.a2a_out_bytes / 1e6), fmt::format("{:.2f}", s.a2a_in_bytes / 1e6),
         fmt::format("{:.3f}", s.inter_host_fwd_ms), fmt::format("{:.3f}", s.inter_host_bwd_ms)});
  }
  std::string out =
      fmt::format("hosts: {}\n", task.topology.str(task.num_devices())) + table.render();
  if (cut) {
    out += fmt::format("the {} hosts with the slowest devices of {}\n", limit, hosts.size());
  }
  return out;
}

}  // namespace embshard
