// `bench kernel`'s data types: the DRAM case's table stored as each type,
// forward and row-wise Adagrad step timed round by round beside fp32.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "bench/kernel_bench_internal.h"
#include "embshard/bench/kernel_bench.h"
#include "embshard/kernel/precision.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/statistics.h"

namespace embshard {
namespace {

// One type's copy of the case's table (bind_case's, packed in place where
// the type is not fp32) and its rounds.
struct TypedTable {
  DataType type;
  CaseData data;
  std::vector<double> fwd_ms, step_ms, fwd_ratio, step_ratio;
};

TypedTable make_typed(DataType type, const std::vector<BenchTable>& tables, int64_t batch_size,
                      uint64_t seed) {
  TypedTable out{type, bind_case(tables, batch_size, seed), {}, {}, {}, {}};
  TableBatch& tb = out.data.batch.tables[0];
  if (type != DataType::kFp32) {  // the case's dim (128): each stored row fits in its fp32 row
    pack_rows(type, tb.weights, tb.rows, tb.dim, tb.weights);
    tb.type = type;
    tb.packed = tb.weights;
    tb.weights = nullptr;
  }
  return out;
}

double timed(CacheFlusher& cache, const auto& call) {
  cache.flush();
  return time_ms(call);
}

}  // namespace

std::vector<KernelTypeResult> run_kernel_types(const KernelBenchOptions& options,
                                               std::string* description, Reporter& reporter) {
  int64_t batch_size = 0;
  const std::vector<BenchTable> tables = make_dram_case(options, &batch_size);
  const BenchTable& t = tables[0];
  const int64_t lookups = static_cast<int64_t>(t.trace.indices.size());
  *description = fmt::format(
      "dram_uniform: 1 table, {} rows x dim {}, B={}, pooling {}, uniform random indices", t.rows,
      t.dim, batch_size, lookups / batch_size);
  std::vector<TypedTable> typed;
  for (size_t k = 0; k < data_type_names().size(); ++k) {
    typed.push_back(make_typed(static_cast<DataType>(k), tables, batch_size, options.seed));
  }
  CacheFlusher cache;
  TbeWorkspace workspace;
  const OptimizerConfig& adagrad = options.optimizers.rowwise_adagrad;
  const auto check = [](const Status& s) {
    ES_CHECK(s.ok(), "bench kernel: data types: {}", s.message());
  };
  const int rounds = options.warmup_runs + options.timed_runs;
  for (int round = 0; round < rounds; ++round) {
    std::vector<size_t> order(typed.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = (k + round) % order.size();
    std::vector<double> fwd(typed.size(), -1), step(typed.size(), -1);
    for (size_t k : order) {
      CaseData& c = typed[k].data;
      const auto forward = [&] {
        check(tbe_forward(c.batch, c.output->floats(), options.threads));
      };
      fwd[k] = timed(cache, forward);
      if (!data_type_trains(typed[k].type)) continue;
      step[k] = timed(cache, [&] {
        forward();
        check(tbe_backward_update(c.batch, c.grad_output.data(), adagrad, options.threads,
                                  workspace));
      });
    }
    std::string line;
    for (size_t k = 0; k < typed.size(); ++k) {
      line += fmt::format(" {} {:.2f}", data_type_name(typed[k].type), fwd[k]);
      if (step[k] > 0) line += fmt::format("/{:.2f}", step[k]);
      if (round < options.warmup_runs) continue;
      typed[k].fwd_ms.push_back(fwd[k]);
      typed[k].fwd_ratio.push_back(fwd[0] / fwd[k]);
      if (step[k] > 0) {
        typed[k].step_ms.push_back(step[k]);
        typed[k].step_ratio.push_back(step[0] / step[k]);
      }
    }
    reporter.note(fmt::format("[bench kernel] data types round {}/{}{} (fwd/step ms):{}", round + 1,
                              rounds, round < options.warmup_runs ? " (warm-up)" : "", line));
  }
  std::vector<KernelTypeResult> results;
  for (const TypedTable& tt : typed) {
    KernelTypeResult r;
    r.type = tt.type;
    r.row_bytes = data_type_row_bytes(tt.type, t.dim);
    r.gathered_bytes = static_cast<double>(lookups) * static_cast<double>(r.row_bytes);
    r.fwd_ms = median(tt.fwd_ms);
    r.fwd_speedup = median(tt.fwd_ratio);
    if (!tt.step_ms.empty()) {
      r.step_ms = median(tt.step_ms);
      r.step_speedup = median(tt.step_ratio);
    }
    results.push_back(r);
  }
  return results;
}

std::string format_kernel_types(const KernelBenchReport& report) {
  if (report.types.empty()) return "";
  std::string s = fmt::format(
      "data types on {}; the same rounds, types in a rotating order after a cache flush;\n"
      "x fp32 = median over rounds of (fp32 ms / type ms), > 1 where the type is faster; GB/s = "
      "lookups x stored row bytes / forward time, against memcpy {:.2f} GB/s\n",
      report.types_description, report.memcpy_gb_per_s);
  s += fmt::format("  {:<6} {:>9} {:>9} {:>9} {:>8} {:>9} {:>12} {:>8}\n", "type", "row bytes",
                   "fwd ms", "fwd GB/s", "x fp32", "% memcpy", "Adagrad ms", "x fp32");
  for (const KernelTypeResult& r : report.types) {
    s += fmt::format("  {:<6} {:>9} {:>9.3f} {:>9.2f} {:>8.2f} {:>9.1f} {:>12} {:>8}\n",
                     data_type_name(r.type), r.row_bytes, r.fwd_ms, r.fwd_gb_per_s(), r.fwd_speedup,
                     100.0 * r.fwd_gb_per_s() / report.memcpy_gb_per_s,
                     r.step_ms > 0 ? fmt::format("{:.3f}", r.step_ms) : "forward-only",
                     r.step_ms > 0 ? fmt::format("{:.2f}", r.step_speedup) : "-");
  }
  return s;
}

}  // namespace embshard
