// `embshard bench kernel`: times embshard's TBE kernels against peer
// implementations (libtorch's embedding_bag, FBGEMM's CPU table-batched
// embedding) and a memcpy bandwidth probe, single-threaded by default,
// medians of interleaved rounds after warm-up.
//
// The core benchmark knows the peers only through KernelPeer. The libtorch
// peer lives in src/bench/torch_peer_torch.cpp (library embshard_torch), so
// the core library never depends on libtorch; the FBGEMM peer
// (src/bench/fbgemm_peer.cpp) is a Python process (python/embshard/
// fbgemm_peer.py under the Python that imports fbgemm_gpu), driven call by
// call so that its rounds interleave with ours.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/kernel/tbe.h"
#include "embshard/workload/trace.h"

namespace embshard {

class Reporter;

// Bytes read and written before every timed call (3x the 32 MiB L3): each
// training iteration looks up a new batch, so no implementation may find
// the previous call's rows in cache.
inline constexpr int64_t kKernelBenchFlushBytes = int64_t{96} << 20;

// What a round times, for every implementation that has it.
enum class KernelOp { kForward, kTrainSgd, kTrainRowWiseAdagrad };
inline constexpr KernelOp kKernelOps[] = {KernelOp::kForward, KernelOp::kTrainSgd,
                                          KernelOp::kTrainRowWiseAdagrad};

// The learning rates and eps of the timed training steps, ours and the peers'.
struct KernelBenchOptimizers {
  // Small: weights stay sane over many timed steps.
  OptimizerConfig sgd{OptimizerType::kSgd, 1e-4f, 1e-8f};
  OptimizerConfig rowwise_adagrad{OptimizerType::kRowWiseAdagrad, 1e-3f, 1e-8f};
};

// A (table, row) of a case: rows compared after a training step.
using TableRow = std::pair<int, int64_t>;

// Another implementation of the fused operator, timed on the same batch.
class KernelPeer {
 public:
  virtual ~KernelPeer() = default;
  virtual std::string name() const = 0;
  // What it is and how it runs, for the report (after the first prepare).
  virtual std::string about() const { return ""; }
  // Binds to the batch's tables (weights may be shared, or copied now);
  // `grad_output` ([B, total_dim]) stays valid until the next prepare.
  virtual void prepare(const FusedBatch& batch, const float* grad_output,
                       const KernelBenchOptimizers& optimizers) = 0;
  virtual bool has(KernelOp op) const { return op != KernelOp::kTrainRowWiseAdagrad; }
  // One call: forward; or forward, backward of sum(output * grad_output) and
  // the optimizer's update. Returns the peer's own timing of it in ms, or a
  // negative number where the harness's clock around the call is the figure
  // (in-process peers).
  virtual double run(KernelOp op) = 0;

  // Numerics, checked before timing; empty: the peer offers no check.
  // The output [B, total_dim] of one untimed forward.
  virtual std::vector<float> forward_output() { return {}; }
  // `rows` of the peer's weights before, then after, one untimed training
  // step of `op` (2 x the rows' dims floats).
  virtual std::vector<float> train_rows(KernelOp /*op*/, const std::vector<TableRow>& /*rows*/) {
    return {};
  }
};

// libtorch's embedding_bag (sparse gradient) on `threads` threads.
// Defined in embshard_torch; only callers linking it may call this.
std::unique_ptr<KernelPeer> make_torch_kernel_peer(int threads);

struct FbgemmPeerOptions {
  int threads = 1;
  int64_t flush_bytes = kKernelBenchFlushBytes;
  // Seconds to wait for one reply (loading a case of GiBs included).
  double reply_timeout_s = 900;
};

// FBGEMM's CPU TBE through python/embshard/fbgemm_peer.py under
// torchrec_python() (util/python_peer.h). Null, with the reason in
// `why_not`, where no such Python is found; a Python that is found but
// cannot run FBGEMM fails loudly at the first prepare.
std::unique_ptr<KernelPeer> make_fbgemm_kernel_peer(const FbgemmPeerOptions& options,
                                                    std::string* why_not);

// One table of a benchmark case: its shape and one batch of bags.
struct BenchTable {
  int64_t rows = 0;
  int dim = 0;
  TableTrace trace;
};

struct KernelBenchOptions {
  bool quick = false;
  int threads = 1;
  uint64_t seed = 1;
  int warmup_runs = 3;
  int timed_runs = 10;
  KernelBenchOptimizers optimizers;
};

// One implementation's figures on a case, per KernelOp (index: the op).
struct ImplResult {
  std::string name;
  double ms[3] = {-1.0, -1.0, -1.0};       // medians over timed rounds; < 0: not run
  // Peers: median over timed rounds of (this ms / ours ms) in the same
  // round: how many times faster ours is, paired so that a slow phase of
  // the machine, which both see, cancels. < 0: not run.
  double speedup[3] = {-1.0, -1.0, -1.0};
  // The numerics check before timing (peers offering one): largest
  // |peer - ours| of the forward output, and of the rows' updates after one
  // SGD / row-wise Adagrad step, relative to the largest update. < 0: none.
  double forward_max_abs_diff = -1.0;
  double update_max_rel_diff[3] = {-1.0, -1.0, -1.0};

  bool ran(KernelOp op) const { return ms[static_cast<int>(op)] > 0.0; }
  double ms_of(KernelOp op) const { return ms[static_cast<int>(op)]; }
  double speedup_of(KernelOp op) const { return speedup[static_cast<int>(op)]; }
};

struct KernelCaseResult {
  std::string name;
  std::string description;
  int64_t batch_size = 0;
  int num_tables = 0;
  int64_t lookups = 0;           // indices in the batch, all tables
  double gathered_bytes = 0.0;   // sum over lookups of dim * 4
  double weight_bytes = 0.0;
  ImplResult ours;
  std::vector<ImplResult> peers;  // in the order of the peers given
  double memcpy_gb_per_s = 0.0;

  double gb_per_s(double ms) const { return gathered_bytes / (ms * 1e6); }
  double fwd_fraction_of_memcpy() const {
    return gb_per_s(ours.ms_of(KernelOp::kForward)) / memcpy_gb_per_s;
  }
};

// One data type on the DRAM case (its table stored as the type), timed
// round by round beside fp32: forward, and the row-wise Adagrad step where
// the type trains.
struct KernelTypeResult {
  DataType type = DataType::kFp32;
  int64_t row_bytes = 0;                 // a stored row of the case's dim
  double gathered_bytes = 0.0;           // lookups x row_bytes
  double fwd_ms = -1.0, step_ms = -1.0;  // medians; step < 0: forward-only type
  // Median over rounds of (fp32 ms / this type's ms) in the same round: > 1
  // where the type is faster.
  double fwd_speedup = -1.0, step_speedup = -1.0;
  double fwd_gb_per_s() const { return gathered_bytes / (fwd_ms * 1e6); }
};

struct KernelBenchReport {
  int threads = 1;
  bool quick = false;
  int warmup_runs = 0;
  int timed_runs = 0;
  double memcpy_gb_per_s = 0.0;
  double memcpy_buffer_bytes = 0.0;
  std::vector<std::string> peer_names;
  std::vector<std::string> peer_about;  // KernelPeer::about(), per peer
  // One line per peer that is not there and why ("FBGEMM: no Python ...").
  std::vector<std::string> missing_peers;
  std::vector<KernelCaseResult> cases;
  std::string types_description;        // the case the data types ran on
  std::vector<KernelTypeResult> types;  // fp32 first
};

// Every data type on the DRAM case, paired with fp32 round by round.
std::vector<KernelTypeResult> run_kernel_types(const KernelBenchOptions& options,
                                               std::string* description, Reporter& reporter);

// Times ours and the peers (none: ours only) on one set of tables. The
// tables may come from any source (e.g. a real workload's traces). Before
// timing, each peer that offers a numerics check is compared with ours
// (forward output, then one step's updates of sampled rows); a difference
// beyond float rounding throws an Error naming the peer, case and figure.
// Each round runs every op of every implementation once, the order rotated
// from round to round; each call after a cache flush.
KernelCaseResult run_kernel_case(const std::string& name, const std::string& description,
                                 std::vector<BenchTable> tables, int64_t batch_size,
                                 const KernelBenchOptions& options,
                                 const std::vector<KernelPeer*>& peers, Reporter& reporter);

// Both built-in cases, the data types and the memcpy probe; each round's figures go to
// `reporter`.
KernelBenchReport run_kernel_bench(const KernelBenchOptions& options,
                                   const std::vector<KernelPeer*>& peers, Reporter& reporter);

std::string format_kernel_report(const KernelBenchReport& report);
nlohmann::json kernel_report_to_json(const KernelBenchReport& report);

}  // namespace embshard
