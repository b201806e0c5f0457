// `bench kernel`: the built-in cases, the timing loop and the memcpy probe.
// Reporting (table and JSON) is in kernel_bench_report.cpp.
#include "embshard/bench/kernel_bench.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include "bench/kernel_bench_internal.h"
#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"
#include "embshard/util/huge_buffer.h"
#include "embshard/util/random.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

// In [-scale, scale), from a fast stream: GiBs of weights are filled quickly.
float uniform(SplitMix64& rng, float scale) {
  return scale * (static_cast<float>(rng.next() >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

void fill_uniform(float* v, int64_t n, float scale, uint64_t seed) {
  SplitMix64 rng{seed};
  for (int64_t i = 0; i < n; ++i) v[i] = uniform(rng, scale);
}

void fill_uniform(std::vector<float>& v, float scale, uint64_t seed) {
  fill_uniform(v.data(), static_cast<int64_t>(v.size()), scale, seed);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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

void describe_tables(const std::vector<BenchTable>& tables, KernelCaseResult& r) {
  r.num_tables = static_cast<int>(tables.size());
  for (const BenchTable& t : tables) {
    const int64_t nnz = static_cast<int64_t>(t.trace.indices.size());
    r.lookups += nnz;
    r.gathered_bytes += static_cast<double>(nnz) * t.dim * sizeof(float);
    r.weight_bytes += static_cast<double>(t.rows) * t.dim * sizeof(float);
  }
}

}  // namespace

CaseData bind_case(const std::vector<BenchTable>& tables, int64_t batch_size, uint64_t seed) {
  CaseData c;
  c.batch.batch_size = batch_size;
  c.weights.resize(tables.size());
  c.momentum.resize(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const BenchTable& bt = tables[t];
    ES_CHECK(bt.trace.batch_size() == batch_size,
             "bench table {}: trace batch size {} != case batch size {}", t,
             bt.trace.batch_size(), batch_size);
    const int64_t size = bt.rows * bt.dim;
    c.weights[t] = std::make_unique<HugeBuffer>(size * static_cast<int64_t>(sizeof(float)));
    fill_uniform(c.weights[t]->floats(), size, 0.05f, seed + t);
    c.momentum[t].assign(bt.rows, 0.0f);
    TableBatch tb;
    tb.weights = c.weights[t]->floats();
    tb.momentum = c.momentum[t].data();
    tb.rows = bt.rows;
    tb.dim = bt.dim;
    tb.offsets = bt.trace.offsets.data();
    tb.indices = bt.trace.indices.data();
    c.batch.tables.push_back(tb);
  }
  c.grad_output.resize(batch_size * c.batch.total_dim());
  fill_uniform(c.grad_output, 1.0f, seed_for(seed, SeedUse::kKernelGradients));
  c.output = std::make_unique<HugeBuffer>(
      static_cast<int64_t>(c.grad_output.size() * sizeof(float)));
  return c;
}

void OursKernel::run(KernelOp op) {
  auto check_ok = [](const Status& s, const char* what) {
    ES_CHECK(s.ok(), "bench kernel: embshard's {} failed: {}", what, s.message());
  };
  check_ok(tbe_forward(c_.batch, c_.output->floats(), threads_), "forward");
  if (op == KernelOp::kForward) return;
  const OptimizerConfig& optimizer =
      op == KernelOp::kTrainSgd ? optimizers_.sgd : optimizers_.rowwise_adagrad;
  check_ok(tbe_backward_update(c_.batch, c_.grad_output.data(), optimizer, threads_, workspace_),
           "backward");
}

namespace {}  // namespace

// Case (a): one DRAM-resident table with uniform random indices.
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

namespace {

// Case (b): 20 tables shaped like Meta's 2021 synthetic set (heavy-tailed
// rows and pooling, Zipf-skewed indices), seeded.
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

// One implementation's times on a case, round by round.
struct Series {
  KernelPeer* peer = nullptr;  // null: ours
  ImplResult* result = nullptr;
  std::vector<double> ms[3], ratio[3];
  bool has(KernelOp op) const { return peer == nullptr || peer->has(op); }
};

const char* op_short(KernelOp op) {
  switch (op) {
    case KernelOp::kForward: return "fwd";
    case KernelOp::kTrainSgd: return "SGD step";
    case KernelOp::kTrainRowWiseAdagrad: return "Adagrad step";
  }
  return "?";
}

double timed_call(Series& s, OursKernel& ours, KernelOp op, CacheFlusher& cache) {
  cache.flush();
  double self_ms = -1.0;
  const double ms = time_ms([&] {
    if (s.peer != nullptr) {
      self_ms = s.peer->run(op);
    } else {
      ours.run(op);
    }
  });
  return self_ms >= 0.0 ? self_ms : ms;
}

// Every op of every implementation that has it, once. The order of the
// implementations rotates with the round, so that none always runs first
// (or after the same neighbour) and drift in the machine's load hits all
// alike. Returns the round's figures for the log.
std::string run_round(std::vector<Series>& series, OursKernel& ours, CacheFlusher& cache,
                      int round, bool timed) {
  std::string line;
  for (KernelOp op : kKernelOps) {
    const int o = static_cast<int>(op);
    std::vector<size_t> order;
    for (size_t i = 0; i < series.size(); ++i) {
      if (series[i].has(op)) order.push_back(i);
    }
    std::rotate(order.begin(), order.begin() + round % order.size(), order.end());
    std::vector<double> ms(series.size(), -1.0);
    for (size_t i : order) ms[i] = timed_call(series[i], ours, op, cache);
    line += fmt::format("; {}", op_short(op));
    for (size_t i = 0; i < series.size(); ++i) {
      if (ms[i] < 0.0) continue;
      line += fmt::format(" {} {:.2f}", series[i].result->name, ms[i]);
      if (!timed) continue;
      series[i].ms[o].push_back(ms[i]);
      if (i > 0) series[i].ratio[o].push_back(ms[i] / ms[0]);
    }
  }
  return line;
}

void prepare_and_check(const std::string& case_name, CaseData& c, OursKernel& ours,
                       const std::vector<KernelPeer*>& peers, const KernelBenchOptions& options,
                       std::vector<ImplResult>& results, Reporter& reporter) {
  results.resize(peers.size());
  for (size_t k = 0; k < peers.size(); ++k) {
    ImplResult& r = results[k];
    r.name = peers[k]->name();
    reporter.note(fmt::format("[bench kernel] {}: preparing {}", case_name, r.name));
    // Each peer takes the weights as they are now and is checked at once,
    // before the next one's check steps ours.
    peers[k]->prepare(c.batch, c.grad_output.data(), options.optimizers);
    check_peer_numerics(case_name, c, ours, *peers[k], r);
    if (r.forward_max_abs_diff < 0.0) continue;
    std::string line = fmt::format("[bench kernel] {}: {} agrees with embshard: forward within "
                                   "{:.2g} (largest |difference|)",
                                   case_name, r.name, r.forward_max_abs_diff);
    for (KernelOp op : {KernelOp::kTrainSgd, KernelOp::kTrainRowWiseAdagrad}) {
      const double d = r.update_max_rel_diff[static_cast<int>(op)];
      if (d >= 0.0) line += fmt::format(", {} updates within {:.2g} of the largest", op_short(op), d);
    }
    reporter.note(line);
  }
}

}  // namespace

KernelCaseResult run_kernel_case(const std::string& name, const std::string& description,
                                 std::vector<BenchTable> tables, int64_t batch_size,
                                 const KernelBenchOptions& options,
                                 const std::vector<KernelPeer*>& peers, Reporter& reporter) {
  KernelCaseResult r;
  r.name = name;
  r.description = description;
  r.batch_size = batch_size;
  describe_tables(tables, r);
  CaseData c = bind_case(tables, batch_size, options.seed);
  OursKernel ours(c, options.threads, options.optimizers);
  r.ours.name = "embshard";
  prepare_and_check(name, c, ours, peers, options, r.peers, reporter);

  std::vector<Series> series(peers.size() + 1);
  series[0].result = &r.ours;
  for (size_t k = 0; k < peers.size(); ++k) {
    series[k + 1].peer = peers[k];
    series[k + 1].result = &r.peers[k];
  }
  CacheFlusher cache;
  const int rounds = options.warmup_runs + options.timed_runs;
  for (int round = 0; round < rounds; ++round) {
    const bool timed = round >= options.warmup_runs;
    const std::string line = run_round(series, ours, cache, round, timed);
    reporter.note(fmt::format("[bench kernel] {} round {}/{}{} (ms){}", name, round + 1, rounds,
                              timed ? "" : " (warm-up)", line));
  }
  for (Series& s : series) {
    for (int o = 0; o < 3; ++o) {
      if (s.ms[o].empty()) continue;
      s.result->ms[o] = median(s.ms[o]);
      if (!s.ratio[o].empty()) s.result->speedup[o] = median(s.ratio[o]);
    }
  }
  return r;
}

KernelBenchReport run_kernel_bench(const KernelBenchOptions& options,
                                   const std::vector<KernelPeer*>& peers, Reporter& reporter) {
  ES_CHECK(options.threads >= 1, "bench kernel: --threads must be >= 1, got {}",
           options.threads);
  ES_CHECK(options.timed_runs >= 1, "bench kernel: timed runs must be >= 1, got {}",
           options.timed_runs);
  omp_set_num_threads(options.threads);
  KernelBenchReport report;
  report.threads = options.threads;
  report.quick = options.quick;
  report.warmup_runs = options.warmup_runs;
  report.timed_runs = options.timed_runs;
  for (KernelPeer* p : peers) report.peer_names.push_back(p->name());
  report.memcpy_buffer_bytes = options.quick ? 256.0 * (1 << 20) : 512.0 * (1 << 20);
  reporter.note(fmt::format("[bench kernel] memcpy probe, {:.0f} MiB buffers",
                            report.memcpy_buffer_bytes / (1 << 20)));
  report.memcpy_gb_per_s =
      host_memcpy_gb_per_s(static_cast<int64_t>(report.memcpy_buffer_bytes), options.quick ? 5 : 9);
  reporter.note(fmt::format("[bench kernel] memcpy {:.2f} GB/s", report.memcpy_gb_per_s));

  int64_t batch_size = 0;
  reporter.note("[bench kernel] building case dram_uniform");
  std::vector<BenchTable> dram = make_dram_case(options, &batch_size);
  const std::string dram_desc = fmt::format(
      "1 table, {} rows x dim {} fp32 ({:.0f} MiB, DRAM-resident), B={}, pooling {} "
      "(fixed), uniform random indices",
      dram[0].rows, dram[0].dim, dram[0].rows * dram[0].dim * 4.0 / (1 << 20), batch_size,
      dram[0].trace.indices.size() / batch_size);
  report.cases.push_back(run_kernel_case("dram_uniform", dram_desc, std::move(dram), batch_size,
                                         options, peers, reporter));

  reporter.note("[bench kernel] building case synth2021_like");
  std::vector<BenchTable> synth = make_synth_like_case(options, &batch_size);
  const std::string synth_desc = fmt::format(
      "20 tables, rows log-uniform 100..{}, dims from {{16,32,64,128}}, B={}, lognormal "
      "pooling (mean ~16), Zipf(1.05) indices",
      options.quick ? "500K" : "2M", batch_size);
  report.cases.push_back(run_kernel_case("synth2021_like", synth_desc, std::move(synth),
                                         batch_size, options, peers, reporter));
  for (KernelCaseResult& r : report.cases) r.memcpy_gb_per_s = report.memcpy_gb_per_s;
  report.types = run_kernel_types(options, &report.types_description, reporter);
  for (KernelPeer* p : peers) report.peer_about.push_back(p->about());
  return report;
}

}  // namespace embshard
