// Hosts: devices grouped on hosts, fast links inside a host and one slower
// link from each host to the others (a NIC its devices share).
//
// A flat communication model (every CommModel here) prices every byte at the
// links it was measured on: inside one host. With_topology() adds the
// inter-host level: each host's link carries what its devices exchange with
// devices on other hosts, and every device of the host waits for it,
//
//   host_ms(h) = latency + max(bytes out of h, bytes into h) / inter_host_gbps,
//
// in each exchange of the iteration (the pooled all-to-all forward and
// backward; the collectives together: the index all-to-all and the row
// shards' reduce-scatter forward, their all-gather and the all-reduce of
// replicas backward). A device's figure for an exchange is the flat one or its
// host's, whichever is more: the link's transfers overlap the work inside the
// host (scripts/experiments/hosts.sh measures it). The exchanges run as
// embshard's executors run them (flat, every device to every device), so a
// host's bytes follow from its devices' loads alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "embshard/cost/comm_model.h"

namespace embshard {

struct Topology {
  int devices_per_host = 0;          // 0: every device on one host
  double inter_host_gbps = 0;        // each host's link, each direction (1e9 bytes/s)
  double inter_host_latency_us = 0;  // per exchange that crosses hosts

  // Whether `devices` devices span more than one host.
  bool hierarchical(int devices) const {
    return devices_per_host > 0 && devices_per_host < devices;
  }
  int host_of(int device) const { return devices_per_host > 0 ? device / devices_per_host : 0; }
  int num_hosts(int devices) const;
  // "2 hosts of 2 devices, 1.25 GB/s and 20 us between hosts" ("one host" when flat).
  std::string str(int devices) const;
};

// Error naming the option (`--devices-per-host`, `--inter-host-gbps`, ...)
// when the figures do not make a topology for `devices` devices.
void check_topology(const Topology& t, int devices);

// What crosses host links in one direction of one exchange, per host.
struct HostBytes {
  std::vector<double> out, in;
  double busiest(int host) const { return std::max(out[host], in[host]); }
};

// Each host's bytes in a flat all-to-all where device d sends `batch` / N
// samples of `cols[d]` fp32 columns to every other device (the pooled
// all-to-all forward; the reduce-scatter of partial sums).
HostBytes alltoall_host_bytes(const Topology& t, std::span<const double> cols, int64_t batch);

// A flat model's pooled all-to-all figures (CommModel::comm_ms's arguments;
// an empty span is not computed) with the inter-host level: each device's
// the larger of its flat figure and its host's link time (forward, after its
// wait for the last device). Nothing for one host.
void add_host_level(const Topology& t, int64_t batch, std::span<const double> dim_sums,
                    std::span<const double> delays_ms, std::span<double> fwd_ms,
                    std::span<double> bwd_ms);

// Each host's link ms in one iteration, forward and backward: its pooled
// all-to-all's and its collectives' (under which with_topology keeps each of
// the host's devices).
struct HostComm {
  std::vector<double> fwd_ms, bwd_ms;
  HostBytes a2a;  // of the pooled all-to-all, forward (the backward reverses it)
};
HostComm host_comm(const Topology& t, int64_t batch, std::span<const double> a2a_dims,
                   const CollectiveLoad* collectives);

// `flat` with the inter-host level of `t` at `batch` (flat itself where `t`
// has one host, or where `flat` measures the network). Its floor is the
// larger of the flat floor and twice the least any host's link can take.
std::shared_ptr<const CommModel> with_topology(std::shared_ptr<const CommModel> flat,
                                               const Topology& t, int64_t batch, int devices);

// Under `comm`, a floor under every device's host link ms in one iteration
// (exchanges and collectives, forward and backward), whatever the plan; 0
// unless `comm` prices hosts (with_topology). Table t's pooled outputs
// cross the links as `dims[t]` columns each pass (every sharding but a
// replica moves at least its table-wise bytes), or, where
// `replica_bytes[t]` >= 0, as its replica's all-reduce: the cheaper counts.
double host_link_floor_ms(const CommModel& comm, int devices, std::span<const double> dims,
                          std::span<const double> replica_bytes);

}  // namespace embshard
