// scripts/emulated_hosts.sh: ranks grouped as hosts behind shaped links, and
// `validate` pricing those links on what bench comm measured there.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "embshard/cost/topology.h"
#include "embshard/util/record_file.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;

const std::string kScript = std::string(EMBSHARD_SOURCE_DIR) + "/scripts/emulated_hosts.sh";

// Network namespaces need root and a kernel that grants them.
bool can_make_hosts() {
  return testing::have_mpirun() &&
         testing::run_shell("ip netns add es_probe && ip netns del es_probe").exit_code == 0;
}

TEST(EmulatedHosts, CliRefusesBadArguments) {
  for (const std::string args :
       {"", "2 2 0.5", "1 2 0.5 -- true", "2 0 0.5 -- true", "2 2 fast -- true", "2 2 0.5 true"}) {
    const testing::CommandResult r = testing::run_shell(kScript + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(
        r.output.find(args.empty() || args.find("--") == std::string::npos ? "usage" : "must be"),
        std::string::npos)
        << args << ": " << r.output;
  }
}

// Two hosts of one rank behind 0.02 GB/s links: what crosses them takes at
// least the link's time (the slowest rank of each placement against the
// host's bytes), and validate prices the same links.
TEST(EmulatedHosts, MpiLinksSlowTheExchangesAsTheyAreShaped) {
  if (!can_make_hosts()) GTEST_SKIP() << "no mpirun or no network namespaces here";
  testing::ScratchDir dir("emulated_hosts");
  const std::string out = dir.file("comm.jsonl");
  const testing::CommandResult run = testing::run_shell(
      "timeout -k 5 120 " + kScript + " 2 1 0.02 -- " + EMBSHARD_CLI_PATH +
      " bench comm --samples 3 --batch 512 --warmup 1 --repeats 3 --max-delay-ms 1 "
      "--tables-per-device 4,8 --seed 5 --show 0 -o " +
      out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<json> records = RecordFile::read_all(out, nullptr, nullptr);
  ASSERT_EQ(records.size(), 3u);
  const Topology hosts{1, 0.02, 0};
  for (const json& r : records) {
    const std::vector<double> dims = r["dim_sums"].get<std::vector<double>>();
    const HostBytes b = alltoall_host_bytes(hosts, dims, 512);
    const double link_ms = std::max(b.busiest(0), b.busiest(1)) / (0.02 * 1e6);
    const std::vector<double> raw = r["raw_bwd_ms"].get<std::vector<double>>();
    EXPECT_GT(*std::ranges::max_element(raw), 0.7 * link_ms) << r.dump();
  }
  const testing::CommandResult v = testing::run_cli(
      "validate --data " + out + " --raw --devices-per-host 1 --inter-host-gbps 0.02");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("2 devices on 2 hosts of 1 devices, 0.02 GB/s between hosts"),
            std::string::npos)
      << v.output;
  EXPECT_NE(v.output.find("- slowest device's"), std::string::npos) << v.output;
}

}  // namespace
}  // namespace embshard
