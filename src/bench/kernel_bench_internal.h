// `bench kernel` internals shared by kernel_bench.cpp (cases, timing) and
// kernel_bench_check.cpp (the peers' numerics check).
#pragma once

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "embshard/bench/kernel_bench.h"
#include "embshard/kernel/tbe.h"
#include "embshard/util/huge_buffer.h"

namespace embshard {

// Milliseconds `f()` takes on the steady clock.
template <typename F>
double time_ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Evicts the caches before a timed call: each training iteration looks up a
// new batch, so no implementation may find the previous call's rows in L3.
class CacheFlusher {
 public:
  CacheFlusher() : buffer_(kBytes) { std::memset(buffer_.data(), 0, kBytes); }
  void flush() {
    char* p = buffer_.data();
    for (int64_t i = 0; i < kBytes; i += 64) p[i] += 1;
  }

 private:
  static constexpr int64_t kBytes = kKernelBenchFlushBytes;
  HugeBuffer buffer_;
};

// Owns the weights (and row-wise Adagrad state) of a case's tables and binds
// them into a FusedBatch.
struct CaseData {
  std::vector<std::unique_ptr<HugeBuffer>> weights;
  std::vector<std::vector<float>> momentum;
  std::vector<float> grad_output;
  std::unique_ptr<HugeBuffer> output;  // 64-byte aligned, as a framework's would be
  FusedBatch batch;
};

CaseData bind_case(const std::vector<BenchTable>& tables, int64_t batch_size, uint64_t seed);

// The data types' table of the report (empty where none ran).
std::string format_kernel_types(const KernelBenchReport& report);

// Case (a): one DRAM-resident table of dim 128, uniform random indices.
std::vector<BenchTable> make_dram_case(const KernelBenchOptions& options, int64_t* batch_size);

// embshard's kernels on a case: one KernelOp per call.
class OursKernel {
 public:
  OursKernel(CaseData& data, int threads, const KernelBenchOptimizers& optimizers)
      : c_(data), threads_(threads), optimizers_(optimizers) {}
  void run(KernelOp op);
  const float* output() { return c_.output->floats(); }

 private:
  CaseData& c_;
  int threads_;
  KernelBenchOptimizers optimizers_;
  TbeWorkspace workspace_;
};

// Compares `peer` with ours on the case before timing (forward output, then
// one step of each training op both have, on sampled rows), filling the
// check's figures of `result`; throws an Error where they differ beyond
// float rounding. Runs ours' steps too: the weights move by one step each.
void check_peer_numerics(const std::string& case_name, CaseData& data, OursKernel& ours,
                         KernelPeer& peer, ImplResult& result);

}  // namespace embshard
