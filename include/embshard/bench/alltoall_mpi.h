// The MPI pieces `bench comm` and `eval` share (library embshard_mpi, files
// *_mpi.cpp only): a session, a watchdog that bounds every collective, and
// the timed all-to-alls of one placement.
//
// Protocol: rank 0 broadcasts a control message (status, an index, every
// device's dim sum and delay); every rank times its all-to-alls; rank 0
// gathers the per-rank medians. Nothing assumes shared memory, so a hostfile
// spreading the ranks over many hosts works unchanged.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "embshard/measure/alltoall.h"
#include "embshard/cost/comm_model.h"

namespace embshard {
class Reporter;
}  // namespace embshard

namespace embshard::mpi {

using Clock = std::chrono::steady_clock;

// kMeasure: time a placement's all-to-alls; kMeasureCollectives: its
// row-wise and data-parallel collectives.
enum Status : int { kMeasure = 0, kDone = 1, kSetupError = 2, kMeasureCollectives = 3 };

// Tells `reporter` "<tool>: rank R: <what>" and ends the whole job
// (MPI_Abort): the peers wait in a collective, and only an abort ends them
// promptly.
[[noreturn]] void abort_run(Reporter& reporter, const std::string& tool, int rank,
                            const std::string& what);

// MPI_Init .. MPI_Finalize around one run; errors come back as return codes
// so that the watchdog can name the failing operation.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

// Runs every collective non-blocking and waits for it with a deadline; a
// collective past it (a rank died or hangs) aborts the job naming it.
class Watchdog {
 public:
  Watchdog(std::string tool, int rank, double timeout_s, Reporter& reporter)
      : tool_(std::move(tool)),
        rank_(rank),
        timeout_s_(timeout_s),
        reporter_(&reporter),
        oversubscribed_(host_oversubscribed()) {}

  void check(int rc, const char* what) const;
  // Spins (yielding) while the wait is short, so that timings stay precise,
  // then polls every 0.2 ms: a long wait is a straggler, a dead peer, or rank
  // 0 busy between measurements. On an oversubscribed host (more ranks than
  // cores) it never spins: an idle rank yields the core to the ones that
  // move data.
  void wait(MPI_Request& request, const char* what) const;
  void barrier(const char* what) const;
  void bcast(void* data, int count, MPI_Datatype type, const char* what) const;
  void gather(const void* send, int count, MPI_Datatype type, void* recv, const char* what) const;
  int rank() const { return rank_; }
  const std::string& tool() const { return tool_; }
  Reporter& reporter() const { return *reporter_; }
  Watchdog with_timeout(double timeout_s) const {
    return Watchdog(tool_, rank_, timeout_s, *reporter_);
  }
  // More ranks on this host than hardware threads (Open MPI's local size).
  static bool host_oversubscribed();

 private:
  std::string tool_;
  int rank_;
  double timeout_s_;
  Reporter* reporter_;
  bool oversubscribed_;
};

// [status, index, dim sums (N), delays in ms (N), one spare]; doubles hold
// the integers exactly. kMeasureCollectives carries a CollectiveLoad in the
// same slots: row-shard columns, index bytes received, all-reduce bytes.
std::vector<double> control_message(int status, int64_t index, const std::vector<double>& dim_sums,
                                    const std::vector<double>& delays_ms, int n,
                                    double spare = 0);

// One rank's figures for one placement. Normalized: forward = its wait for
// the last device's delay + the transfer scaled by the drift factor
// (normalized / raw, from the interleaving against the reference exchange);
// backward = the raw backward scaled likewise. Raw: medians of its own runs.
struct RankTiming {
  double fwd_ms = 0, bwd_ms = 0;          // normalized
  double raw_fwd_ms = 0, raw_bwd_ms = 0;  // medians
  double probe_ms = 0;                    // the reference exchange's median
  double ratio_mad = 0;                   // dispersion of the ratios
};
constexpr int kRankTimingFields = 6;  // gathered as doubles, in the order above

// The reference exchange's quiet time on every rank: `runs` collective runs,
// each rank's 15th percentile (measure/interleaved.h explains why a low
// quantile), or the times an earlier run recorded: rank 0 passes them in
// `all` (one per rank; empty: measure now, and `all` gets them) and every
// rank returns its own. Collective.
double shared_exchange_reference(const Watchdog& dog, const AllToAllTiming& o, int n, int runs,
                                 std::vector<double>& all);

// Rank 0: broadcasts one placement (kMeasure, `index`, dim sums, delays), times
// its own all-to-alls with every other rank (serve_alltoalls), and gathers
// every rank's timings (one RankTiming per rank). `reference_ms` is this
// rank's quiet time of the reference exchange. `before_timing` runs on rank 0
// between the broadcast and the timing (a test hook).
std::vector<RankTiming> measure_alltoalls(const Watchdog& dog, const AllToAllTiming& o, int n,
                                          int64_t index, const std::vector<double>& dim_sums,
                                          const std::vector<double>& delays_ms,
                                          double reference_ms,
                                          const std::function<void(int64_t)>& before_timing = {});

// Rank 0: measure_alltoalls for the collectives of `load` (kMeasureCollectives).
std::vector<RankTiming> measure_collectives(const Watchdog& dog, const AllToAllTiming& o, int n,
                                            int64_t index, const CollectiveLoad& load,
                                            double reference_ms);

// Ranks > 0: take part in rank 0's measure_alltoalls and measure_collectives until it broadcasts
// kDone (returns true) or kSetupError (false). `control` waits for each
// control message (rank 0 may be busy for long between measurements);
// `before_timing(index)` runs before each timing (a test hook).
bool serve_alltoalls(const Watchdog& control, const Watchdog& dog, const AllToAllTiming& o,
                     int n, double reference_ms,
                     const std::function<void(int64_t)>& before_timing = {});

// Rank 0: tells the serving ranks to stop (kDone or kSetupError).
void stop_serving(const Watchdog& dog, int status, int n);

// Every rank's hostname, on rank 0 (empty elsewhere).
std::vector<std::string> gather_hosts(const Watchdog& dog, int n);

}  // namespace embshard::mpi
