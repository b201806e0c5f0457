// Hosts and the inter-host level of communication.
#include "embshard/cost/topology.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "embshard/cost/floor.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// Devices on host h of `n`.
int host_size(const Topology& t, int h, int n) {
  return std::min(t.devices_per_host, n - h * t.devices_per_host);
}

double host_ms(const Topology& t, double bytes) {
  return bytes > 0 ? t.inter_host_latency_us * 1e-3 + floor_ms(bytes, t.inter_host_gbps) : 0.0;
}

// Adds host_ms of each host's busier direction of `b` to `ms` (per host).
void add_host_ms(const Topology& t, const HostBytes& b, std::vector<double>& ms) {
  for (size_t h = 0; h < ms.size(); ++h) ms[h] += host_ms(t, b.busiest(static_cast<int>(h)));
}

// Each host's share of an exchange where device d sends `send[d]` and
// receives `recv[d]` bytes, spread evenly over its N - 1 peers.
HostBytes spread_host_bytes(const Topology& t, std::span<const double> send,
                            std::span<const double> recv) {
  const int n = static_cast<int>(send.size());
  HostBytes b{std::vector<double>(t.num_hosts(n), 0.0), std::vector<double>(t.num_hosts(n), 0.0)};
  if (n <= 1) return b;
  for (int d = 0; d < n; ++d) {
    const int h = t.host_of(d);
    const double away = static_cast<double>(n - host_size(t, h, n)) / (n - 1);
    b.out[h] += send[d] * away;
    b.in[h] += recv[d] * away;
  }
  return b;
}

// The per-host ms of the collectives of `load`, added to fwd and bwd.
void add_collectives(const Topology& t, int64_t batch, const CollectiveLoad& load,
                     std::vector<double>& fwd, std::vector<double>& bwd) {
  const int n = static_cast<int>(load.rw_dim_sums.size());
  add_host_ms(t, spread_host_bytes(t, load.index_send_bytes, load.index_recv_bytes), fwd);
  const HostBytes rw = alltoall_host_bytes(t, load.rw_dim_sums, batch);
  add_host_ms(t, rw, fwd);  // the reduce-scatter
  add_host_ms(t, rw, bwd);  // the all-gather, the same bytes reversed
  if (load.allreduce_bytes > 0) {
    // A ring over the ranks crosses each host's link once each way, with
    // 2 (N-1) / N of the bytes.
    const double bytes = 2.0 * (n - 1) / n * load.allreduce_bytes;
    for (double& ms : bwd) ms += host_ms(t, bytes);
  }
}

class HostCommModel : public CommModel {
 public:
  HostCommModel(std::shared_ptr<const CommModel> flat, const Topology& t, int64_t batch)
      : flat_(std::move(flat)), t_(t), batch_(batch) {}

  std::string name() const override { return flat_->name() + " + hosts"; }
  bool forward_only() const override { return flat_->forward_only(); }

  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override {
    flat_->comm_ms(dim_sums, delays_ms, fwd_ms, bwd_ms);
    add_host_level(t_, batch_, dim_sums, delays_ms, fwd_ms,
                   flat_->forward_only() ? std::span<double>() : bwd_ms);
  }

  void collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                     std::span<double> bwd_ms) const override {
    const int n = static_cast<int>(fwd_ms.size());
    std::vector<double> flat_fwd(n, 0.0), flat_bwd(n, 0.0);
    flat_->collective_ms(load, flat_fwd, flat_bwd);
    std::vector<double> fwd(t_.num_hosts(n), 0.0), bwd(t_.num_hosts(n), 0.0);
    add_collectives(t_, batch_, load, fwd, bwd);
    if (flat_->forward_only()) std::fill(bwd.begin(), bwd.end(), 0.0);
    for (int d = 0; d < n; ++d) {
      fwd_ms[d] += std::max(flat_fwd[d], fwd[t_.host_of(d)]);
      bwd_ms[d] += std::max(flat_bwd[d], bwd[t_.host_of(d)]);
    }
  }

  // A host of m devices carrying dims D_h sends D_h (N - m) and receives
  // m (D - D_h) columns of batch / N samples: the busier is least at
  // D_h = m D / N, where both are m (N - m) D / N. The smallest host's value
  // is under every device's, forward and backward; so is the flat floor.
  double floor_ms(double total_dims, int devices) const override {
    double least = std::numeric_limits<double>::infinity();
    for (int h = 0; h < t_.num_hosts(devices); ++h) {
      const double m = host_size(t_, h, devices), n = devices;
      const double bytes = static_cast<double>(batch_) / n * 4.0 * m * (n - m) * total_dims / n;
      least = std::min(least, host_ms(t_, bytes));
    }
    return std::max(flat_->floor_ms(total_dims, devices), (flat_->forward_only() ? 1 : 2) * least);
  }

  // Host h of m devices: a table's columns (batch B, fp32) on h send
  // a = 4 B (N - m) / N bytes a column out, elsewhere b = 4 B m / N into h;
  // the busier direction is at least their mix b / (a + b) out + a / (a + b)
  // in, which is a b / (a + b) = 4 B m (N - m) / N^2 a column wherever the
  // table is (row blocks and column pieces carry at least its columns), in
  // each pass. A replica puts 2 (N - 1) / N of its bytes on every link,
  // backward. Every host's backward crosses its link at least once (a
  // latency). Forward only: one pass, and a replica crosses nothing. A
  // device pays at least its host's link: the least host's is every device's
  // floor.
  double link_floor_ms(int n, std::span<const double> dims,
                       std::span<const double> replica_bytes) const {
    const int hosts = t_.num_hosts(n);
    if (hosts <= 1) return 0.0;
    const bool training = !flat_->forward_only();
    double least = std::numeric_limits<double>::infinity();
    for (int h = 0; h < hosts; ++h) {
      const double m = host_size(t_, h, n);
      const double per_col = (training ? 2 : 1) * 4.0 * static_cast<double>(batch_) * m * (n - m) /
                             (static_cast<double>(n) * n);
      double bytes = 0;
      for (size_t i = 0; i < dims.size(); ++i) {
        double table = per_col * dims[i];
        if (replica_bytes[i] >= 0) {
          table = std::min(table, training ? 2.0 * (n - 1) / n * replica_bytes[i] : 0.0);
        }
        bytes += table;
      }
      least = std::min(least, (training ? t_.inter_host_latency_us * 1e-3 : 0.0) +
                                  embshard::floor_ms(bytes, t_.inter_host_gbps));
    }
    return least;
  }

 private:
  std::shared_ptr<const CommModel> flat_;
  Topology t_;
  int64_t batch_;
};

}  // namespace

int Topology::num_hosts(int devices) const {
  return devices_per_host > 0 ? (devices + devices_per_host - 1) / devices_per_host : 1;
}

std::string Topology::str(int devices) const {
  if (!hierarchical(devices)) return "one host";
  const int hosts = num_hosts(devices);
  const int last = devices - (hosts - 1) * devices_per_host;
  return fmt::format(
      "{} hosts of {} devices{}, {:.3g} GB/s{} between hosts", hosts, devices_per_host,
      last == devices_per_host ? "" : fmt::format(" (the last {})", last), inter_host_gbps,
      inter_host_latency_us > 0 ? fmt::format(" and {:.3g} us", inter_host_latency_us) : "");
}

void check_topology(const Topology& t, int devices) {
  ES_CHECK(t.devices_per_host >= 0, "--devices-per-host is {}, must be at least 1",
           t.devices_per_host);
  ES_CHECK(std::isfinite(t.inter_host_latency_us) && t.inter_host_latency_us >= 0,
           "--inter-host-latency-us is {}, must be 0 or more", t.inter_host_latency_us);
  ES_CHECK(std::isfinite(t.inter_host_gbps) && t.inter_host_gbps >= 0,
           "--inter-host-gbps is {}, must be more than 0", t.inter_host_gbps);
  if (!t.hierarchical(devices)) return;
  ES_CHECK(t.inter_host_gbps > 0,
           "--devices-per-host {} puts {} devices on {} hosts: give the link between hosts "
           "(--inter-host-gbps)",
           t.devices_per_host, devices, t.num_hosts(devices));
}

HostBytes alltoall_host_bytes(const Topology& t, std::span<const double> cols, int64_t batch) {
  const int n = static_cast<int>(cols.size());
  const int hosts = t.num_hosts(n);
  HostBytes b{std::vector<double>(hosts, 0.0), std::vector<double>(hosts, 0.0)};
  if (hosts <= 1) return b;
  std::vector<double> host_cols(hosts, 0.0);
  double total = 0;
  for (int d = 0; d < n; ++d) {
    host_cols[t.host_of(d)] += cols[d];
    total += cols[d];
  }
  const double per_col = static_cast<double>(batch) / n * 4.0;  // fp32, batch / N samples
  for (int h = 0; h < hosts; ++h) {
    const double m = host_size(t, h, n);
    b.out[h] = per_col * host_cols[h] * (n - m);
    b.in[h] = per_col * m * (total - host_cols[h]);
  }
  return b;
}

void add_host_level(const Topology& t, int64_t batch, std::span<const double> dim_sums,
                    std::span<const double> delays_ms, std::span<double> fwd_ms,
                    std::span<double> bwd_ms) {
  if (!t.hierarchical(static_cast<int>(dim_sums.size()))) return;
  const HostBytes b = alltoall_host_bytes(t, dim_sums, batch);
  double last = 0;
  for (double delay : delays_ms) last = std::max(last, delay);
  for (size_t d = 0; d < dim_sums.size(); ++d) {
    const double ms = host_ms(t, b.busiest(t.host_of(static_cast<int>(d))));
    // Forward, the host's link starts once the last device has started.
    if (!fwd_ms.empty()) fwd_ms[d] = std::max(fwd_ms[d], last - delays_ms[d] + ms);
    if (!bwd_ms.empty()) bwd_ms[d] = std::max(bwd_ms[d], ms);
  }
}

HostComm host_comm(const Topology& t, int64_t batch, std::span<const double> a2a_dims,
                   const CollectiveLoad* collectives) {
  const int n = static_cast<int>(a2a_dims.size());
  HostComm c{std::vector<double>(t.num_hosts(n), 0.0), std::vector<double>(t.num_hosts(n), 0.0),
             alltoall_host_bytes(t, a2a_dims, batch)};
  if (!t.hierarchical(n)) return c;
  add_host_ms(t, c.a2a, c.fwd_ms);
  add_host_ms(t, c.a2a, c.bwd_ms);
  if (collectives != nullptr && collectives->rw_dim_sums.size() == a2a_dims.size()) {
    add_collectives(t, batch, *collectives, c.fwd_ms, c.bwd_ms);
  }
  return c;
}

std::shared_ptr<const CommModel> with_topology(std::shared_ptr<const CommModel> flat,
                                               const Topology& t, int64_t batch, int devices) {
  check_topology(t, devices);
  if (!t.hierarchical(devices) || flat->measures_network()) return flat;
  if (dynamic_cast<const HostCommModel*>(flat.get()) != nullptr) return flat;  // priced already
  return std::make_shared<HostCommModel>(std::move(flat), t, batch);
}

double host_link_floor_ms(const CommModel& comm, int devices, std::span<const double> dims,
                          std::span<const double> replica_bytes) {
  ES_CHECK(dims.size() == replica_bytes.size(), "host_link_floor_ms: {} tables' dims, {} replicas'",
           dims.size(), replica_bytes.size());
  const auto* hosts = dynamic_cast<const HostCommModel*>(&comm);
  return hosts != nullptr ? hosts->link_floor_ms(devices, dims, replica_bytes) : 0.0;
}

}  // namespace embshard
