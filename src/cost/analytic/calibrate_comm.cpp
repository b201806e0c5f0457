// Fits the all-to-all latency and bandwidth (alpha, beta) of the analytic
// model to a `bench comm` data file, and the collectives' constants (terms.h)
// to `bench comm --collectives` files, by non-negative least squares.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/measure/alltoall.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/analytic/calibrate.h"
#include "embshard/util/nnls.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/record_file.h"
#include "embshard/util/statistics.h"

namespace embshard {

void fit_comm_from_file(const std::string& path, Calibration& c, Reporter& reporter) {
  LoadOptions strict;
  strict.check = RecordCheck::kStrict;
  const CommData data = load_comm_data(path, strict);
  const size_t n = static_cast<size_t>(data.num_devices);
  const double batch = static_cast<double>(data.batch_size);
  ES_CHECK(n >= 2, "{}: field 'num_devices' is {}: one device has no all-to-all to fit", path,
           n);
  // One row per device and direction: ms = alpha + bytes * (1/beta), where the
  // forward's wait for stragglers (max delay - own delay) is taken out first.
  std::vector<double> a, b;
  for (const CommRecord& r : data.records) {
    const std::vector<double>& dims = r.dim_sums;
    const std::vector<double>& delays = r.delays_ms;
    const std::vector<double>& fwd = r.fwd_ms;
    const std::vector<double>& bwd = r.bwd_ms;
    double total = 0, max_delay = 0;
    for (size_t d = 0; d < n; ++d) total += dims[d], max_delay = std::max(max_delay, delays[d]);
    for (size_t d = 0; d < n; ++d) {
      const double bytes =
          alltoall_bytes(dims[d], total, static_cast<double>(n), batch).busiest();
      a.insert(a.end(), {1.0, bytes, 1.0, bytes});
      b.push_back(fwd[d] - (max_delay - delays[d]));
      b.push_back(bwd[d]);
    }
  }
  ES_CHECK(!b.empty(), "{}: no records to fit the all-to-all to", path);
  const std::vector<double> x = nnls(a, b, 2);
  c.comm_latency_us = x[0] * 1e3;
  c.comm_gbps = x[1] > 1e-6 / kUnboundedGbps ? 1e-6 / x[1] : kUnboundedGbps;
  c.comm_source = path;
  reporter.note(fmt::format("calibrate: all-to-all from {} ({} records, {} devices): {:.1f} us + "
                            "bytes / {:.2f} GB/s",
                            path, data.records.size(), n, c.comm_latency_us, c.comm_gbps));
}

namespace {

// The rows of one rank count: the coefficients of analytic_collective_ms's
// constants (terms.h), one row per rank and direction, each divided by the
// measured time (relative errors, so that the large all-reduces do not
// decide the small exchanges' fit). Columns: forward alpha_f, 1/beta_i,
// 1/beta_rs; backward alpha, 1/beta, 1/beta_ar.
constexpr size_t kCollectiveColumns = 6;
struct CollectiveRows {
  std::vector<double> a, b;
  size_t records = 0;
};

void add_rows(const CollectiveData& data, CollectiveRows& rows) {
  const size_t n = static_cast<size_t>(data.num_devices);
  const double devices = static_cast<double>(n), batch = static_cast<double>(data.batch_size);
  for (const CollectiveRecord& r : data.records) {
    const CollectiveLoad& load = r.load;
    double total_rw = 0, total_index = 0;
    for (size_t d = 0; d < n; ++d) total_rw += load.rw_dim_sums[d], total_index += load.index_recv_bytes[d];
    for (size_t d = 0; d < n; ++d) {
      double f_latency = 0, f_index = 0, f_bytes = 0, b_latency = 0, b_bytes = 0, b_allreduce = 0;
      if (total_index > 0) {
        f_latency += 1;
        f_index = std::max(load.index_recv_bytes[d], load.index_send_bytes[d]);
      }
      if (total_rw > 0) {
        const double bytes = alltoall_bytes(load.rw_dim_sums[d], total_rw, devices, batch).busiest();
        f_latency += devices - 1, f_bytes = bytes;
        b_latency += devices - 1, b_bytes = bytes;
      }
      if (load.allreduce_bytes > 0) {
        b_latency += 2 * (devices - 1);
        b_allreduce = 2 * (devices - 1) / devices * load.allreduce_bytes;
      }
      const double fwd = r.fwd_ms[d], bwd = r.bwd_ms[d];
      if (f_latency > 0 && fwd > 0) {
        rows.a.insert(rows.a.end(), {f_latency / fwd, f_index / fwd, f_bytes / fwd, 0, 0, 0});
        rows.b.push_back(1.0);
      }
      if (b_latency > 0 && bwd > 0) {
        rows.a.insert(rows.a.end(), {0, 0, 0, b_latency / bwd, b_bytes / bwd, b_allreduce / bwd});
        rows.b.push_back(1.0);
      }
    }
  }
  rows.records += data.records.size();
}

// Fits the rows: the constants, and the fit's median relative error in
// percent. A constant no row has a term of (no all-reduce, say) is 0: as the
// backward's, or the all-to-all's.
Calibration::RankCollectives fit_rows(const CollectiveRows& rows, double* median_error_pct) {
  const std::vector<double> x = nnls(rows.a, rows.b, kCollectiveColumns);
  std::vector<bool> seen(kCollectiveColumns, false);
  std::vector<double> ape;  // the rows are fit / measured
  for (size_t row = 0; row < rows.b.size(); ++row) {
    double fit = 0;
    for (size_t k = 0; k < kCollectiveColumns; ++k) {
      const double coefficient = rows.a[kCollectiveColumns * row + k];
      fit += coefficient * x[k];
      seen[k] = seen[k] || coefficient > 0;
    }
    ape.push_back(100 * std::abs(fit - 1.0));
  }
  *median_error_pct = ape.empty() ? 0.0 : median(ape);
  auto latency_us = [&](size_t k) { return seen[k] ? x[k] * 1e3 : 0.0; };
  auto gbps = [&](size_t k) {
    if (!seen[k]) return 0.0;
    return x[k] > 1e-6 / kUnboundedGbps ? 1e-6 / x[k] : kUnboundedGbps;
  };
  return {.latency_us = latency_us(3),
          .gbps = gbps(4),
          .allreduce_gbps = gbps(5),
          .fwd_latency_us = latency_us(0),
          .index_gbps = gbps(1),
          .reduce_scatter_gbps = gbps(2)};
}

// The fitted constants, for the notes.
std::string describe(const Calibration::RankCollectives& k) {
  return fmt::format("forward {:.1f} us a step, index bytes / {:.2f} GB/s, reduce-scatter bytes "
                     "/ {:.2f} GB/s; backward {:.1f} us a step, all-gather bytes / {:.2f} GB/s, "
                     "all-reduce bytes / {:.2f} GB/s",
                     k.fwd_latency_us, k.index_gbps, k.reduce_scatter_gbps, k.latency_us, k.gbps,
                     k.allreduce_gbps);
}

}  // namespace

void fit_collectives_from_files(const std::vector<std::string>& paths, Calibration& c,
                                Reporter& reporter) {
  LoadOptions strict;
  strict.check = RecordCheck::kStrict;
  std::map<std::pair<int, int64_t>, CollectiveRows> by_ranks;  // (ranks, batch)
  CollectiveRows all;
  for (const std::string& path : paths) {
    const CollectiveData data = load_collective_data(path, strict);
    ES_CHECK(data.num_devices >= 2,
             "{}: field 'num_devices' is {}: one device has no collectives to fit", path,
             data.num_devices);
    add_rows(data, by_ranks[{data.num_devices, data.batch_size}]);
    add_rows(data, all);
  }
  ES_CHECK(!all.b.empty(), "{}: no records to fit the collectives to", fmt::join(paths, ", "));
  double error_pct = 0;
  const Calibration::RankCollectives pooled = fit_rows(all, &error_pct);
  c.collective_latency_us = pooled.latency_us;
  c.collective_gbps = pooled.gbps;
  c.allreduce_gbps = pooled.allreduce_gbps;
  c.collective_fwd_latency_us = pooled.fwd_latency_us;
  c.index_gbps = pooled.index_gbps;
  c.reduce_scatter_gbps = pooled.reduce_scatter_gbps;
  c.collective_source = fmt::format("{}", fmt::join(paths, ","));
  reporter.note(fmt::format("calibrate: collectives from {} records, all files: {}; median error "
                            "of the fit {:.1f}% over {} rank-directions",
                            all.records, describe(pooled), error_pct, all.b.size()));
  c.collectives_by_ranks.clear();
  for (const auto& [key, rows] : by_ranks) {
    if (rows.b.empty()) continue;
    Calibration::RankCollectives fitted = fit_rows(rows, &error_pct);
    std::tie(fitted.ranks, fitted.batch_size) = key;
    c.collectives_by_ranks.push_back(fitted);
    reporter.note(fmt::format("calibrate: collectives at {} ranks, batch {} ({} records): {}; "
                              "median error {:.1f}%",
                              key.first, key.second, rows.records, describe(fitted), error_pct));
  }
}

}  // namespace embshard
