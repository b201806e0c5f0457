// `embshard calibrate`: times a handful of probe shards on the real executor
// and fits the analytic model's coefficients to them.
//
// The probes are chosen so that every term of analytic_terms() dominates at
// least one of them: a large table read at random (DRAM gathers), small hot
// tables (cached gathers), a narrow table with many lookups (per-lookup
// overhead), many tiny tables (per-table overhead), small vs large row counts
// (1 vs 2 radix-sort passes), and skewed access (reuse within a batch).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "embshard/cost/analytic/calibrate.h"
#include "embshard/cost/analytic/terms.h"
#include "embshard/util/nnls.h"
#include "embshard/util/reporter.h"
#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"
#include "embshard/util/machine.h"

namespace embshard {
namespace {

using Clock = std::chrono::steady_clock;

struct ProbeTable {
  int64_t rows;
  int dim;
  int pooling;    // lookups per bag
  bool skewed;    // u^3 skew, hot rows scattered over the table (as in real traces)
};
struct Probe {
  std::string name;
  std::vector<ProbeTable> tables;
};

// Big enough that the distinct rows touched (x 4 bytes x dim) exceed the
// last-level cache a few times over in the full run; a quarter in quick mode.
std::vector<Probe> make_probes(bool quick) {
  const int64_t big = quick ? (int64_t{1} << 18) : (int64_t{1} << 20);
  const int many = quick ? 12 : 24;
  std::vector<Probe> p = {
      {"dram dim128", {{big, 128, quick ? 32 : 64, false}}},
      {"dram dim32", {{big * 2, 32, quick ? 32 : 64, false}}},
      {"mid dim64", {{big / 4, 64, 16, false}}},
      {"mid dim16 x4", {{big / 4, 16, 8, false}, {big / 8, 16, 8, false},
                        {big / 2, 16, 4, false}, {big, 16, 2, false}}},
      {"hot dim128", {{1000, 128, 32, false}}},
      {"hot dim32", {{1000, 32, 32, false}}},
      {"hot dim4", {{100, 4, 64, false}}},
      {"hot dim24", {{1000, 24, 16, false}}},
      {"mid dim4", {{big / 4, 4, 16, false}}},
      {"skewed dim64", {{big, 64, 32, true}}},
      {"pf1 dim64", {{big, 64, 1, false}}},
      {"huge dim4", {{big * 8, 4, 8, false}}},
      {"huge dim16 skewed", {{big * 4, 16, 16, true}}},
      {"big dim8 pf2 x3", {{big * 2, 8, 2, false}, {big, 8, 2, true}, {big * 4, 8, 2, false}}},
      {"mixed", {{big / 16, 8, 8, false}, {5000, 128, 4, false}, {big / 2, 32, 16, true},
                 {300, 64, 2, false}, {big / 8, 128, 1, false}}},
  };
  Probe tiny{fmt::format("{} tiny tables", many), {}};
  for (int i = 0; i < many; ++i) tiny.tables.push_back({100, i % 2 ? 4 : 8, 1, false});
  p.push_back(tiny);
  p.push_back({"one tiny", {{100, 4, 1, false}}});
  return p;
}

struct ProbeData {
  std::vector<int64_t> offsets, indices;
};

struct ProbeResult {
  std::vector<AnalyticTable> tables;  // exact lookups and distinct rows
  double fwd_ms = 0, bwd_ms = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void make_table(const ProbeTable& spec, int64_t batch, std::mt19937_64& rng, ProbeData& d,
                AnalyticTable& a) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  d.offsets.assign(1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int i = 0; i < spec.pooling; ++i) {
      const double x = u(rng);
      const double v = spec.skewed ? x * x * x : x;
      int64_t row = std::min(spec.rows - 1, static_cast<int64_t>(v * spec.rows));
      // Scatter the hot rows: a fixed odd multiplier mod rows (a bijection
      // whenever rows is a power of two, as for the skewed probes).
      if (spec.skewed) row = static_cast<int64_t>((uint64_t(row) * 0x9E3779B1ull) % spec.rows);
      d.indices.push_back(row);
    }
    d.offsets.push_back(static_cast<int64_t>(d.indices.size()));
  }
  std::vector<int64_t> sorted = d.indices;
  std::sort(sorted.begin(), sorted.end());
  a.rows = spec.rows;
  a.dim = spec.dim;
  a.lookups = static_cast<double>(d.indices.size());
  a.distinct_rows =
      static_cast<double>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
}

// How the probes run: training steps of fp32 tables (the fit), or forward
// steps of tables stored as `type` (the conversions' fit).
struct ProbeMode {
  DataType type = DataType::kFp32;
  bool forward_only = false;
};

// One probe set up for timing on the executor: its tables' traces and the
// prepared shard.
class ProbeRun {
 public:
  ProbeRun(const Probe& probe, const CalibrateOptions& o, Executor& executor, uint64_t seed,
           ProbeMode mode)
      : data_(probe.tables.size()) {
    std::mt19937_64 rng(seed);
    result_.tables.resize(probe.tables.size());
    ShardInput input;
    input.batch_size = o.batch_size;
    input.optimizer = OptimizerType::kRowWiseAdagrad;  // what bench compute measures
    input.forward_only = mode.forward_only;
    for (size_t i = 0; i < probe.tables.size(); ++i) {
      make_table(probe.tables[i], o.batch_size, rng, data_[i], result_.tables[i]);
      result_.tables[i].data_type = mode.type;
      input.tables.push_back({probe.tables[i].rows, probe.tables[i].dim, data_[i].offsets.data(),
                              data_[i].indices.data(), mode.type});
    }
    shard_ = executor.prepare(input);
  }

  // One forward and one backward + update; `keep` records their times.
  void run(bool keep) {
    const StepTiming t = shard_->step();
    if (keep) fwd_.push_back(t.fwd_ms), bwd_.push_back(t.bwd_ms);
  }

  ProbeResult result() const {
    ProbeResult r = result_;
    r.fwd_ms = median(fwd_);
    r.bwd_ms = median(bwd_);
    return r;
  }

 private:
  std::vector<ProbeData> data_;
  ProbeResult result_;
  std::unique_ptr<PreparedShard> shard_;
  std::vector<double> fwd_, bwd_;
};

// Runs the probes in interleaved rounds (each round runs every probe once,
// after two warm-up runs each), so that a burst of load from other processes
// on a shared machine spreads over all probes instead of spoiling one; the
// median over rounds is kept.
std::vector<ProbeResult> run_probes(const std::vector<Probe>& probes, const CalibrateOptions& o,
                                    Executor& executor, Reporter& reporter, ProbeMode mode = {}) {
  std::vector<std::unique_ptr<ProbeRun>> runs;
  for (size_t i = 0; i < probes.size(); ++i) {
    runs.push_back(std::make_unique<ProbeRun>(probes[i], o, executor, o.seed + i, mode));
    for (int w = 0; w < 2; ++w) runs.back()->run(false);
  }
  const int rounds = o.quick ? 3 : 9;
  for (int round = 0; round < rounds; ++round) {
    for (auto& run : runs) run->run(true);
  }
  std::vector<ProbeResult> results;
  for (size_t i = 0; i < probes.size(); ++i) {
    results.push_back(runs[i]->result());
    reporter.note(fmt::format("calibrate: probe {:2}/{} {:<18}{} fwd {:8.3f} ms  bwd {:8.3f} ms",
                              i + 1, probes.size(), probes[i].name,
                              mode.type == DataType::kFp32 ? "" : " " + data_type_name(mode.type),
                              results.back().fwd_ms, results.back().bwd_ms));
  }
  return results;
}

// Streaming bandwidth: memcpy of a buffer well past the cache, one way.
double measure_seq_gbps(bool quick) {
  return host_memcpy_gb_per_s(quick ? (int64_t{64} << 20) : kCopyBytes, quick ? 3 : kCopyRuns);
}

int64_t last_level_cache_bytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  int64_t kib = 0;
  if (in >> kib && kib > 0) return kib * 1024;
  return int64_t{32} << 20;  // no sysfs: assume a typical server L3
}


struct Fit {
  std::vector<double> coef_ms;  // ms per unit of each term
  double rms_pct = 0;           // relative RMS error over the probes
};

// Fits forward (or backward) coefficients to the probes, each probe weighted
// by 1/measured so that small shards count as much as large ones (the model
// is judged on percentage errors).
Fit fit_pass(const std::vector<ProbeResult>& probes, bool forward, int64_t batch,
             int64_t cache_bytes, double seq_gbps) {
  const int cols = forward ? kFwdTerms : kBwdTerms;
  std::vector<double> a, b, measured;
  std::vector<double> fixed;  // the part not fitted: the output writes
  for (const ProbeResult& p : probes) {
    const AnalyticTerms t = analytic_terms(p.tables, batch, cache_bytes);
    const double ms = forward ? p.fwd_ms : p.bwd_ms;
    const double known = forward ? t.output_bytes * 1e-6 / seq_gbps : 0.0;
    const double* terms = forward ? t.fwd : t.bwd;
    for (int c = 0; c < cols; ++c) a.push_back(terms[c] / ms);
    b.push_back((ms - known) / ms);
    measured.push_back(ms);
    fixed.push_back(known);
  }
  Fit fit;
  fit.coef_ms = nnls(a, b, cols);
  double sq = 0;
  for (size_t r = 0; r < b.size(); ++r) {
    double pred = fixed[r];
    for (int c = 0; c < cols; ++c) pred += a[r * cols + c] * measured[r] * fit.coef_ms[c];
    sq += std::pow((pred - measured[r]) / measured[r], 2);
  }
  fit.rms_pct = 100.0 * std::sqrt(sq / b.size());
  return fit;
}

double to_gbps(double ms_per_byte) {
  return ms_per_byte > 1e-6 / kUnboundedGbps ? 1e-6 / ms_per_byte : kUnboundedGbps;
}

void store_fits(const Fit& f, const Fit& b, Calibration& c) {
  c.fwd_call_us = f.coef_ms[0] * 1e3;
  c.fwd_per_table_us = f.coef_ms[1] * 1e3;
  c.fwd_per_lookup_ns = f.coef_ms[2] * 1e6;
  c.dram_gather_gbps = to_gbps(f.coef_ms[3]);
  c.cache_gather_gbps = to_gbps(f.coef_ms[4]);
  c.generic_dim_ns_per_element = f.coef_ms[5] * 1e6;
  c.fwd_page_walk_ns = f.coef_ms[6] * 1e6;
  c.bwd_page_walk_ns = b.coef_ms[7] * 1e6;
  c.bwd_call_us = b.coef_ms[0] * 1e3;
  c.bwd_per_table_us = b.coef_ms[1] * 1e3;
  c.bwd_per_lookup_ns = b.coef_ms[2] * 1e6;
  c.sort_ns_per_lookup_pass = b.coef_ms[3] * 1e6;
  c.grad_read_gbps = to_gbps(b.coef_ms[4]);
  c.dram_update_gbps = to_gbps(b.coef_ms[5]);
  c.cache_update_gbps = to_gbps(b.coef_ms[6]);
  c.fwd_fit_rms_pct = f.rms_pct;
  c.bwd_fit_rms_pct = b.rms_pct;
}

// The probes whose forward the conversion dominates or does not: cached and
// DRAM-bound rows, narrow and wide.
std::vector<Probe> conversion_probes(bool quick) {
  std::vector<Probe> out;
  for (Probe& p : make_probes(quick)) {
    for (const char* name : {"dram dim128", "mid dim64", "mid dim16 x4", "hot dim128", "hot dim32",
                             "hot dim4", "mid dim4", "skewed dim64", "mixed"}) {
      if (p.name == name) out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace

void fit_conversions(const CalibrateOptions& o, Calibration& c, Reporter& reporter) {
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.thread_cpu_time = o.thread_cpu_time;
  const std::unique_ptr<Executor> executor = create_executor("cpu", eo);
  ES_CHECK(executor->name() == c.executor,
           "calibrate: the calibration was measured on '{}', and its conversions would be on "
           "'{}' (give the same --threads and --thread-cpu-time)",
           c.executor, executor->name());
  const std::vector<Probe> probes = conversion_probes(o.quick);
  for (int k = 0; k < kConvertedTypes; ++k) {
    const DataType type = static_cast<DataType>(k + 1);
    const std::vector<ProbeResult> results =
        run_probes(probes, o, *executor, reporter, {type, true});
    // What the forward takes beyond its bytes, per element and per row
    // converted: non-negative least squares, each probe weighted by
    // 1 / measured (the model is judged on percentage errors).
    std::vector<double> a, b;
    for (const ProbeResult& r : results) {
      AnalyticTerms t = analytic_terms(r.tables, o.batch_size, c.cache_bytes);
      a.push_back(t.converted_elements[k] * 1e-6 / r.fwd_ms);
      a.push_back(t.converted_lookups[k] * 1e-6 / r.fwd_ms);
      std::fill(std::begin(t.converted_elements), std::end(t.converted_elements), 0.0);
      std::fill(std::begin(t.converted_lookups), std::end(t.converted_lookups), 0.0);
      b.push_back((r.fwd_ms - analytic_fwd_ms(t, c)) / r.fwd_ms);
    }
    const std::vector<double> ns = nnls(a, b, 2);
    c.fwd_convert_ns[k] = ns[0];
    c.fwd_convert_lookup_ns[k] = ns[1];
    reporter.note(
        fmt::format("calibrate: {} forward conversion {:.3f} ns an element, {:.3f} ns "
                    "a row",
                    data_type_name(type), ns[0], ns[1]));
  }
}

Calibration run_calibration(const CalibrateOptions& o, Reporter& reporter) {
  ES_CHECK(o.threads >= 1, "calibrate: --threads is {}, must be >= 1", o.threads);
  ES_CHECK(o.batch_size >= 16 && o.batch_size <= (int64_t{1} << 20),
           "calibrate: --batch is {}, must be in 16..1048576", o.batch_size);
  const auto start = Clock::now();
  Calibration c;
  c.machine_cpu = cpu_model();
  c.threads = o.threads;
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.thread_cpu_time = o.thread_cpu_time;
  const std::unique_ptr<Executor> executor = create_executor("cpu", eo);
  c.executor = executor->name();
  c.batch_size = o.batch_size;
  c.seq_gbps = measure_seq_gbps(o.quick);
  reporter.note(fmt::format("calibrate: memcpy {:.1f} GB/s", c.seq_gbps));
  const std::vector<Probe> probes = make_probes(o.quick);
  reporter.note(fmt::format("calibrate: setting up {} probes", probes.size()));
  const std::vector<ProbeResult> results = run_probes(probes, o, *executor, reporter);
  // The effective cache is less than the L3 (the backward's sort buffers and
  // gradients share it, and a VM may not get all of it): pick the size that
  // fits the probes best.
  const int64_t l3 = last_level_cache_bytes();
  double best = std::numeric_limits<double>::infinity();
  for (double share : {0.03125, 0.0625, 0.125, 0.25, 0.375, 0.5, 0.75, 1.0, 1.5}) {
    const int64_t cache = static_cast<int64_t>(share * l3);
    const Fit f = fit_pass(results, true, o.batch_size, cache, c.seq_gbps);
    const Fit b = fit_pass(results, false, o.batch_size, cache, c.seq_gbps);
    const double score = f.rms_pct * f.rms_pct + b.rms_pct * b.rms_pct;
    if (score < best) {
      best = score;
      c.cache_bytes = cache;
      store_fits(f, b, c);
    }
  }
  for (size_t i = 0; i < probes.size(); ++i) {  // how each probe is fitted
    const AnalyticTerms t = analytic_terms(results[i].tables, o.batch_size, c.cache_bytes);
    reporter.note(fmt::format(
        "calibrate: fit {:<18} fwd {:8.3f} / {:8.3f} ms  bwd {:8.3f} / {:8.3f} ms", probes[i].name,
        analytic_fwd_ms(t, c), results[i].fwd_ms, analytic_bwd_ms(t, c), results[i].bwd_ms));
  }
  fit_conversions(o, c, reporter);
  // Without comm data: a shared-memory all-to-all copies each byte twice
  // (into and out of a shared segment), so half the memcpy bandwidth.
  c.comm_gbps = c.seq_gbps / 2;
  c.comm_latency_us = kDefaultCommLatencyUs;
  if (!o.comm_path.empty()) fit_comm_from_file(o.comm_path, c, reporter);
  c.calibration_s = std::chrono::duration<double>(Clock::now() - start).count();
  reporter.note(
      fmt::format("calibrate: cache {} MiB, fit error fwd {:.1f}% bwd {:.1f}% (RMS), {:.1f} s",
                  c.cache_bytes >> 20, c.fwd_fit_rms_pct, c.bwd_fit_rms_pct, c.calibration_s));
  return c;
}

}  // namespace embshard
