// Hosts: the bytes that cross host links, the inter-host level a flat
// communication model gets, its floor, and the checks of a topology.
#include <gtest/gtest.h>

#include <random>

#include "embshard/cost/topology.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// Every exchange costs a constant per device, and a collective another.
class ConstantComm : public CommModel {
 public:
  ConstantComm(double ms, bool measured = false) : ms_(ms), measured_(measured) {}
  std::string name() const override { return "constant"; }
  void comm_ms(std::span<const double>, std::span<const double> delays, std::span<double> fwd,
               std::span<double> bwd) const override {
    double last = 0;
    for (double d : delays) last = std::max(last, d);
    for (size_t d = 0; d < delays.size(); ++d) {
      if (!fwd.empty()) fwd[d] = ms_ + last - delays[d];
      if (!bwd.empty()) bwd[d] = ms_;
    }
  }
  void collective_ms(const CollectiveLoad&, std::span<double> fwd,
                     std::span<double> bwd) const override {
    for (size_t d = 0; d < fwd.size(); ++d) fwd[d] += ms_, bwd[d] += ms_;
  }
  double floor_ms(double, int) const override { return 2 * ms_; }
  bool measures_network() const override { return measured_; }

 private:
  double ms_;
  bool measured_;
};

Topology hosts_of(int per_host, double gbps, double latency_us = 0) {
  return Topology{per_host, gbps, latency_us};
}

TEST(Topology, HostBytesOfAnAllToAllByHand) {
  // 4 devices, 2 a host, batch 8: a column is 8 / 4 samples x 4 bytes = 8
  // bytes to each other device.
  const std::vector<double> cols = {10, 20, 30, 40};
  const HostBytes b = alltoall_host_bytes(hosts_of(2, 1), cols, 8);
  ASSERT_EQ(b.out.size(), 2u);
  EXPECT_DOUBLE_EQ(b.out[0], 8 * 30 * 2);         // its 30 columns to the 2 devices away
  EXPECT_DOUBLE_EQ(b.in[0], 8 * 2 * (100 - 30));  // both its devices get the other 70
  EXPECT_DOUBLE_EQ(b.out[1], 8 * 70 * 2);
  EXPECT_DOUBLE_EQ(b.in[1], 8 * 2 * 30);
  EXPECT_DOUBLE_EQ(b.busiest(0), 1120);
  // One host: nothing crosses.
  const HostBytes one = alltoall_host_bytes(Topology{}, cols, 8);
  ASSERT_EQ(one.out.size(), 1u);
  EXPECT_DOUBLE_EQ(one.out[0], 0);
}

TEST(Topology, UnevenLastHostAndNames) {
  const Topology t = hosts_of(2, 1.5, 20);
  EXPECT_EQ(t.num_hosts(5), 3);
  EXPECT_EQ(t.host_of(4), 2);
  EXPECT_TRUE(t.hierarchical(5));
  EXPECT_FALSE(t.hierarchical(2));
  EXPECT_EQ(t.str(5), "3 hosts of 2 devices (the last 1), 1.5 GB/s and 20 us between hosts");
  EXPECT_EQ(Topology{}.str(8), "one host");
  // The last host's single device sends its columns to all 4 others.
  const std::vector<double> cols = {1, 1, 1, 1, 5};
  const HostBytes b = alltoall_host_bytes(t, cols, 5);
  EXPECT_DOUBLE_EQ(b.out[2], 5.0 / 5 * 4 * 5 * 4);
  EXPECT_DOUBLE_EQ(b.in[2], 5.0 / 5 * 4 * 1 * 4);
}

TEST(Topology, ChecksNameTheOptions) {
  EXPECT_NO_THROW(check_topology(Topology{}, 8));
  EXPECT_NO_THROW(check_topology(hosts_of(8, 0), 8));  // one host needs no link
  try {
    check_topology(hosts_of(2, 0), 8);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--inter-host-gbps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_topology(hosts_of(-1, 1), 8), Error);
  EXPECT_THROW(check_topology(hosts_of(2, -1), 8), Error);
  EXPECT_THROW(check_topology(hosts_of(2, 1, -3), 8), Error);
}

TEST(Topology, FlatModelKeptForOneHostAndForTheMeasuredNetwork) {
  const auto flat = std::make_shared<ConstantComm>(1.0);
  EXPECT_EQ(with_topology(flat, Topology{}, 8, 4), flat);
  EXPECT_EQ(with_topology(flat, hosts_of(4, 1), 8, 4), flat);
  const auto measured = std::make_shared<ConstantComm>(1.0, true);
  EXPECT_EQ(with_topology(measured, hosts_of(2, 1), 8, 4), measured);
  const auto hosts = with_topology(flat, hosts_of(2, 1), 8, 4);
  EXPECT_NE(hosts, flat);
  EXPECT_EQ(hosts->name(), "constant + hosts");
}

TEST(Topology, EachDeviceTakesTheLargerOfFlatAndItsHostsLink) {
  // Batch 1000 over 4 devices, 2 a host, 1e-3 GB/s (1 byte a us) and 10 us:
  // a column is 1000 bytes to each other device.
  const Topology t = hosts_of(2, 1e-3, 10);
  const auto model = with_topology(std::make_shared<ConstantComm>(2.0), t, 1000, 4);
  const std::vector<double> dims = {1, 0, 0, 0}, delays = {0, 0, 0, 3};
  std::vector<double> fwd(4), bwd(4);
  model->comm_ms(dims, delays, fwd, bwd);
  // Host 0 sends 1 column to 2 devices: 2000 bytes, 2 ms + 10 us; host 1
  // receives as much. Flat is 2 ms: the link wins by its latency.
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(bwd[d], 2.01, 1e-12) << d;
  // Forward: device 0 waits 3 ms for device 3, then its host's link.
  EXPECT_NEAR(fwd[0], 5.01, 1e-12);
  EXPECT_NEAR(fwd[3], 2.01, 1e-12);
  // Few bytes: the flat figure stands.
  const std::vector<double> small = {0.1, 0, 0, 0};
  model->comm_ms(small, delays, {}, bwd);
  for (int d = 0; d < 4; ++d) EXPECT_DOUBLE_EQ(bwd[d], 2.0) << d;
}

TEST(Topology, CollectivesCrossHostsToo) {
  const Topology t = hosts_of(2, 1e-3);
  const auto model = with_topology(std::make_shared<ConstantComm>(0.5), t, 1000, 4);
  CollectiveLoad load;
  load.reset(4);
  load.rw_dim_sums = {1, 0, 0, 0};  // device 0's partial sums: 2000 bytes leave host 0
  load.allreduce_bytes = 4000;      // a ring: 2 x 3/4 x 4000 bytes over each host's link
  std::vector<double> fwd(4, 0.0), bwd(4, 0.0);
  model->collective_ms(load, fwd, bwd);
  EXPECT_NEAR(fwd[0], 2.0, 1e-12);
  EXPECT_NEAR(fwd[2], 2.0, 1e-12);        // host 1 receives them
  EXPECT_NEAR(bwd[0], 2.0 + 6.0, 1e-12);  // the all-gather, then the all-reduce
  // Nothing to exchange: the flat figure.
  CollectiveLoad none;
  none.reset(4);
  std::fill(fwd.begin(), fwd.end(), 0.0);
  std::fill(bwd.begin(), bwd.end(), 0.0);
  model->collective_ms(none, fwd, bwd);
  EXPECT_DOUBLE_EQ(fwd[1], 0.5);
  EXPECT_DOUBLE_EQ(bwd[1], 0.5);
}

TEST(Topology, FloorNeverAboveAnyDevicesExchanges) {
  std::mt19937 rng(17);
  for (int devices : {4, 5, 8, 12}) {
    for (int per_host : {1, 2, 3, 4}) {
      const Topology t = hosts_of(per_host, 0.01, 5);
      if (!t.hierarchical(devices)) continue;
      const auto model = with_topology(std::make_shared<ConstantComm>(0.1), t, 2048, devices);
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<double> dims(devices), zero(devices, 0.0), fwd(devices), bwd(devices);
        double total = 0;
        for (double& d : dims) total += d = std::uniform_int_distribution<int>(0, 300)(rng);
        model->comm_ms(dims, zero, fwd, bwd);
        const double floor = model->floor_ms(total, devices);
        EXPECT_GT(floor, 0.2);  // above the flat floor where the link dominates
        for (int d = 0; d < devices; ++d) {
          EXPECT_LE(floor, fwd[d] + bwd[d] + 1e-9) << devices << " " << per_host << " " << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace embshard
