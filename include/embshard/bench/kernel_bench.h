// `embshard bench kernel`: times embshard's TBE kernels against a peer
// implementation (libtorch's embedding_bag) and a memcpy bandwidth probe, in
// one process, single-threaded, median of repeated runs after warm-up.
//
// The core benchmark knows the peer only through KernelPeer; the libtorch
// peer lives in src/bench/torch_peer_torch.cpp (library embshard_torch), so
// the core library never depends on libtorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/kernel/tbe.h"
#include "embshard/workload/trace.h"

namespace embshard {

class Reporter;

// Another implementation of the fused operator, timed on the same batch.
class KernelPeer {
 public:
  virtual ~KernelPeer() = default;
  virtual std::string name() const = 0;
  // Binds to the batch's tables (weights may be shared, not copied).
  virtual void prepare(const FusedBatch& batch) = 0;
  virtual void forward() = 0;
  // Forward, backward of sum(output * grad_output), then an SGD step.
  virtual void forward_backward_sgd(const float* grad_output, float learning_rate) = 0;
};

// libtorch's embedding_bag (sparse gradient) on `threads` threads.
// Defined in embshard_torch; only callers linking it may call this.
std::unique_ptr<KernelPeer> make_torch_kernel_peer(int threads);

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
};

struct KernelCaseResult {
  std::string name;
  std::string description;
  int64_t batch_size = 0;
  int num_tables = 0;
  int64_t lookups = 0;           // indices in the batch, all tables
  double gathered_bytes = 0.0;   // sum over lookups of dim * 4
  double weight_bytes = 0.0;
  double ours_fwd_ms = 0.0;
  double ours_train_ms = 0.0;    // forward + backward + SGD update
  double peer_fwd_ms = 0.0;      // < 0 without a peer
  double peer_train_ms = 0.0;
  double memcpy_gb_per_s = 0.0;

  double fwd_speedup() const { return peer_fwd_ms / ours_fwd_ms; }
  double train_speedup() const { return peer_train_ms / ours_train_ms; }
  double gb_per_s(double ms) const { return gathered_bytes / (ms * 1e6); }
  double fwd_fraction_of_memcpy() const { return gb_per_s(ours_fwd_ms) / memcpy_gb_per_s; }
};

struct KernelBenchReport {
  int threads = 1;
  bool quick = false;
  double memcpy_gb_per_s = 0.0;
  double memcpy_buffer_bytes = 0.0;
  std::string peer_name;
  std::vector<KernelCaseResult> cases;
};

// Case (a): one DRAM-resident table with uniform random indices.
std::vector<BenchTable> make_dram_case(const KernelBenchOptions& options, int64_t* batch_size);
// Case (b): 20 tables shaped like Meta's 2021 synthetic set (heavy-tailed
// rows and pooling, Zipf-skewed indices), seeded.
std::vector<BenchTable> make_synth_like_case(const KernelBenchOptions& options,
                                             int64_t* batch_size);

// Median one-direction memcpy bandwidth (bytes copied once / time) of a
// buffer of `bytes`, which should be far larger than the last-level cache.
double measure_memcpy_gb_per_s(int64_t bytes, int runs);

// Times ours and the peer (null: ours only) on one set of tables. The tables
// may come from any source (e.g. a real workload's traces).
KernelCaseResult run_kernel_case(const std::string& name, const std::string& description,
                                 std::vector<BenchTable> tables, int64_t batch_size,
                                 const KernelBenchOptions& options, KernelPeer* peer,
                                 Reporter& reporter);

// Both built-in cases plus the memcpy probe; each round's figures go to
// `reporter`.
KernelBenchReport run_kernel_bench(const KernelBenchOptions& options, KernelPeer* peer,
                                   Reporter& reporter);

std::string format_kernel_report(const KernelBenchReport& report);
nlohmann::json kernel_report_to_json(const KernelBenchReport& report);

}  // namespace embshard
