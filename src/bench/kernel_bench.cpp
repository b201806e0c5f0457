// `bench kernel`: the built-in cases, the timing loop and the memcpy probe.
// Reporting (table and JSON) is in kernel_bench_report.cpp.
#include "embshard/bench/kernel_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/huge_buffer.h"

namespace embshard {
namespace {

using Clock = std::chrono::steady_clock;

// SplitMix64: a fast seeded stream to fill GiBs of weights quickly.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float scale) {  // in [-scale, scale)
    return scale * (static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
};

void fill_uniform(float* v, int64_t n, float scale, uint64_t seed) {
  SplitMix64 rng{seed};
  for (int64_t i = 0; i < n; ++i) v[i] = rng.uniform(scale);
}

void fill_uniform(std::vector<float>& v, float scale, uint64_t seed) {
  fill_uniform(v.data(), static_cast<int64_t>(v.size()), scale, seed);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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
  static constexpr int64_t kBytes = int64_t{96} << 20;  // 3x the 32 MiB L3
  HugeBuffer buffer_;
};

template <typename F>
double time_ms(F&& f) {
  const auto start = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Zipf(s) over [0, n) by inverting the continuous power law, then scattered
// by a bijection (x * P + c mod n, P prime > n) so hot rows are not adjacent.
int64_t zipf_row(std::mt19937_64& rng, int64_t n, double s, uint64_t scatter) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double a = 1.0 - s;
  const double top = std::pow(static_cast<double>(n) + 1.0, a);
  const double x = std::pow((top - 1.0) * unit(rng) + 1.0, 1.0 / a) - 1.0;
  const uint64_t rank = std::min<uint64_t>(static_cast<uint64_t>(x), n - 1);
  return static_cast<int64_t>((rank * 2654435761ull + scatter) % static_cast<uint64_t>(n));
}

// Owns the weights of a case's tables and binds them into a FusedBatch.
struct CaseData {
  std::vector<std::unique_ptr<HugeBuffer>> weights;
  std::vector<float> grad_output;
  std::unique_ptr<HugeBuffer> output;  // 64-byte aligned, as a framework's would be
  FusedBatch batch;
};

CaseData bind_case(const std::vector<BenchTable>& tables, int64_t batch_size, uint64_t seed) {
  CaseData c;
  c.batch.batch_size = batch_size;
  c.weights.resize(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const BenchTable& bt = tables[t];
    ES_CHECK(bt.trace.batch_size() == batch_size,
             "bench table {}: trace batch size {} != case batch size {}", t,
             bt.trace.batch_size(), batch_size);
    const int64_t size = bt.rows * bt.dim;
    c.weights[t] = std::make_unique<HugeBuffer>(size * static_cast<int64_t>(sizeof(float)));
    fill_uniform(c.weights[t]->floats(), size, 0.05f, seed + t);
    TableBatch tb;
    tb.weights = c.weights[t]->floats();
    tb.rows = bt.rows;
    tb.dim = bt.dim;
    tb.offsets = bt.trace.offsets.data();
    tb.indices = bt.trace.indices.data();
    c.batch.tables.push_back(tb);
  }
  c.grad_output.resize(batch_size * c.batch.total_dim());
  fill_uniform(c.grad_output, 1.0f, seed ^ 0xABCDEFull);
  c.output = std::make_unique<HugeBuffer>(
      static_cast<int64_t>(c.grad_output.size() * sizeof(float)));
  return c;
}

void describe_tables(const std::vector<BenchTable>& tables, KernelCaseResult& r) {
  r.num_tables = static_cast<int>(tables.size());
  for (const BenchTable& t : tables) {
    const int64_t nnz = static_cast<int64_t>(t.trace.indices.size());
    r.lookups += nnz;
    r.gathered_bytes += static_cast<double>(nnz) * t.dim * sizeof(float);
    r.weight_bytes += static_cast<double>(t.rows) * t.dim * sizeof(float);
  }
}

void check_ok(const Status& s, const std::string& what) {
  ES_CHECK(s.ok(), "bench kernel: {} failed: {}", what, s.message());
}

}  // namespace

std::vector<BenchTable> make_dram_case(const KernelBenchOptions& options, int64_t* batch_size) {
  // Far larger than the 32 MiB L3: nearly every lookup misses to DRAM.
  const int64_t rows = options.quick ? (int64_t{1} << 19) : (int64_t{1} << 21);
  const int dim = 128;
  const int pooling = 32;
  *batch_size = options.quick ? 2048 : 4096;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int64_t> row(0, rows - 1);
  BenchTable t;
  t.rows = rows;
  t.dim = dim;
  t.trace.offsets.resize(*batch_size + 1);
  t.trace.indices.resize(*batch_size * pooling);
  for (int64_t b = 0; b <= *batch_size; ++b) t.trace.offsets[b] = b * pooling;
  for (int64_t& i : t.trace.indices) i = row(rng);
  return {std::move(t)};
}

std::vector<BenchTable> make_synth_like_case(const KernelBenchOptions& options,
                                             int64_t* batch_size) {
  constexpr int kTables = 20;
  constexpr double kZipfExponent = 1.05;
  const double max_rows = options.quick ? 5e5 : 2e6;
  *batch_size = options.quick ? 1024 : 4096;
  std::mt19937_64 rng(options.seed * 7919 + 2021);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Lognormal pooling factors with mean 16 (sigma 1): a few tables pool
  // 50-100 lookups per sample, most fewer than 16.
  std::lognormal_distribution<double> pooling(std::log(16.0) - 0.5, 1.0);
  const int dims[] = {16, 32, 64, 128};
  std::vector<BenchTable> tables(kTables);
  for (BenchTable& t : tables) {
    t.rows = static_cast<int64_t>(std::exp(std::log(100.0) + unit(rng) * std::log(max_rows / 100.0)));
    t.dim = dims[std::uniform_int_distribution<int>(0, 3)(rng)];
    const double mean_pool = std::clamp(pooling(rng), 1.0, 128.0);
    std::uniform_int_distribution<int64_t> length(0, static_cast<int64_t>(2 * mean_pool));
    const uint64_t scatter = rng();
    t.trace.offsets.assign(1, 0);
    for (int64_t b = 0; b < *batch_size; ++b) {
      const int64_t len = length(rng);
      for (int64_t k = 0; k < len; ++k) {
        t.trace.indices.push_back(zipf_row(rng, t.rows, kZipfExponent, scatter));
      }
      t.trace.offsets.push_back(static_cast<int64_t>(t.trace.indices.size()));
    }
  }
  return tables;
}

double measure_memcpy_gb_per_s(int64_t bytes, int runs) {
  HugeBuffer src(bytes), dst(bytes);
  std::memset(src.data(), 1, bytes);  // fault pages in before timing
  std::memset(dst.data(), 2, bytes);
  std::vector<double> ms;
  for (int r = 0; r < runs + 1; ++r) {
    const double t = time_ms([&] { std::memcpy(dst.data(), src.data(), bytes); });
    if (r > 0) ms.push_back(t);  // the first run is a warm-up
  }
  return static_cast<double>(bytes) / (median(ms) * 1e6);
}

KernelCaseResult run_kernel_case(const std::string& name, const std::string& description,
                                 std::vector<BenchTable> tables, int64_t batch_size,
                                 const KernelBenchOptions& options, KernelPeer* peer,
                                 Reporter& reporter) {
  KernelCaseResult r;
  r.name = name;
  r.description = description;
  r.batch_size = batch_size;
  describe_tables(tables, r);
  CaseData c = bind_case(tables, batch_size, options.seed);
  const int threads = options.threads;
  OptimizerConfig sgd;
  sgd.learning_rate = 1e-4f;  // small: weights stay sane over many timed steps
  TbeWorkspace workspace;
  auto ours_fwd = [&] { check_ok(tbe_forward(c.batch, c.output->floats(), threads), "forward"); };
  auto ours_train = [&] {
    ours_fwd();
    check_ok(tbe_backward_update(c.batch, c.grad_output.data(), sgd, threads, workspace),
             "backward");
  };
  if (peer != nullptr) peer->prepare(c.batch);
  // Rounds interleave the implementations so that drift in the machine's
  // load hits all of them alike; medians over the timed rounds.
  CacheFlusher cache;
  auto timed_cold = [&](auto&& f) {
    cache.flush();
    return time_ms(f);
  };
  std::vector<double> of, ot, pf, pt;
  for (int round = 0; round < options.warmup_runs + options.timed_runs; ++round) {
    const bool timed = round >= options.warmup_runs;
    const double a = timed_cold(ours_fwd), b = timed_cold(ours_train);
    double e = -1.0, f = -1.0;
    if (peer != nullptr) {
      e = timed_cold([&] { peer->forward(); });
      f = timed_cold([&] { peer->forward_backward_sgd(c.grad_output.data(), sgd.learning_rate); });
    }
    if (timed) {
      of.push_back(a), ot.push_back(b), pf.push_back(e), pt.push_back(f);
    }
    std::string line = fmt::format("[bench kernel] {} round {}/{}{}: ours fwd {:.2f} ms, train "
                                   "{:.2f} ms",
                                   name, round + 1, options.warmup_runs + options.timed_runs,
                                   timed ? "" : " (warm-up)", a, b);
    if (peer != nullptr) {
      line += fmt::format("; {} fwd {:.2f} ms, train {:.2f} ms", peer->name(), e, f);
    }
    reporter.note(line);
  }
  r.ours_fwd_ms = median(of);
  r.ours_train_ms = median(ot);
  r.peer_fwd_ms = peer != nullptr ? median(pf) : -1.0;
  r.peer_train_ms = peer != nullptr ? median(pt) : -1.0;
  return r;
}

KernelBenchReport run_kernel_bench(const KernelBenchOptions& options, KernelPeer* peer,
                                   Reporter& reporter) {
  ES_CHECK(options.threads >= 1, "bench kernel: --threads must be >= 1, got {}",
           options.threads);
  ES_CHECK(options.timed_runs >= 1, "bench kernel: timed runs must be >= 1, got {}",
           options.timed_runs);
  omp_set_num_threads(options.threads);
  KernelBenchReport report;
  report.threads = options.threads;
  report.quick = options.quick;
  report.peer_name = peer != nullptr ? peer->name() : "";
  report.memcpy_buffer_bytes = options.quick ? 256.0 * (1 << 20) : 512.0 * (1 << 20);
  reporter.note(fmt::format("[bench kernel] memcpy probe, {:.0f} MiB buffers",
                            report.memcpy_buffer_bytes / (1 << 20)));
  report.memcpy_gb_per_s = measure_memcpy_gb_per_s(static_cast<int64_t>(report.memcpy_buffer_bytes),
                                                   options.quick ? 5 : 9);
  reporter.note(fmt::format("[bench kernel] memcpy {:.2f} GB/s", report.memcpy_gb_per_s));

  int64_t batch_size = 0;
  reporter.note("[bench kernel] building case dram_uniform");
  std::vector<BenchTable> dram = make_dram_case(options, &batch_size);
  const std::string dram_desc = fmt::format(
      "1 table, {} rows x dim {} fp32 ({:.0f} MiB, DRAM-resident), B={}, pooling {} "
      "(fixed), uniform random indices",
      dram[0].rows, dram[0].dim, dram[0].rows * dram[0].dim * 4.0 / (1 << 20), batch_size,
      dram[0].trace.indices.size() / batch_size);
  report.cases.push_back(
      run_kernel_case("dram_uniform", dram_desc, std::move(dram), batch_size, options, peer,
                      reporter));

  reporter.note("[bench kernel] building case synth2021_like");
  std::vector<BenchTable> synth = make_synth_like_case(options, &batch_size);
  const std::string synth_desc = fmt::format(
      "20 tables, rows log-uniform 100..{}, dims from {{16,32,64,128}}, B={}, lognormal "
      "pooling (mean ~16), Zipf(1.05) indices",
      options.quick ? "500K" : "2M", batch_size);
  report.cases.push_back(run_kernel_case("synth2021_like", synth_desc, std::move(synth),
                                         batch_size, options, peer, reporter));
  for (KernelCaseResult& r : report.cases) r.memcpy_gb_per_s = report.memcpy_gb_per_s;
  return report;
}

}  // namespace embshard
