// Fits the all-to-all latency and bandwidth (alpha, beta) of the analytic
// model to a `bench comm` data file, and the collectives' (alpha, beta,
// beta_ar) to `bench comm --collectives` files, by non-negative least squares.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/alltoall.h"
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

void fit_collectives_from_files(const std::vector<std::string>& paths, Calibration& c,
                                Reporter& reporter) {
  // One row per rank and direction, unknowns (alpha, 1/beta, 1/beta_ar), the
  // terms of analytic_collective_ms (terms.h).
  std::vector<double> a, b;
  size_t records = 0;
  LoadOptions strict;
  strict.check = RecordCheck::kStrict;
  for (const std::string& path : paths) {
    const CollectiveData data = load_collective_data(path, strict);
    const size_t n = static_cast<size_t>(data.num_devices);
    ES_CHECK(n >= 2, "{}: field 'num_devices' is {}: one device has no collectives to fit",
             path, n);
    const double devices = static_cast<double>(n), batch = static_cast<double>(data.batch_size);
    for (const CollectiveRecord& r : data.records) {
      const CollectiveLoad& load = r.load;
      double total_rw = 0, total_index = 0;
      for (size_t d = 0; d < n; ++d) total_rw += load.rw_dim_sums[d], total_index += load.index_recv_bytes[d];
      for (size_t d = 0; d < n; ++d) {
        double f_latency = 0, f_bytes = 0, b_latency = 0, b_bytes = 0, b_allreduce = 0;
        if (total_index > 0) {
          f_latency += 1;
          f_bytes += std::max(load.index_recv_bytes[d], load.index_send_bytes[d]);
        }
        if (total_rw > 0) {
          const double bytes = alltoall_bytes(load.rw_dim_sums[d], total_rw, devices, batch).busiest();
          f_latency += devices - 1, f_bytes += bytes;
          b_latency += devices - 1, b_bytes += bytes;
        }
        if (load.allreduce_bytes > 0) {
          b_latency += 2 * (devices - 1);
          b_allreduce = 2 * (devices - 1) / devices * load.allreduce_bytes;
        }
        // Rows weighted by 1 / the measured time: relative errors, so that
        // the large all-reduces do not decide the small exchanges' fit.
        const double fwd = r.fwd_ms[d], bwd = r.bwd_ms[d];
        if (f_latency > 0 && fwd > 0) {
          a.insert(a.end(), {f_latency / fwd, f_bytes / fwd, 0.0});
          b.push_back(1.0);
        }
        if (b_latency > 0 && bwd > 0) {
          a.insert(a.end(), {b_latency / bwd, b_bytes / bwd, b_allreduce / bwd});
          b.push_back(1.0);
        }
      }
    }
    records += data.records.size();
  }
  ES_CHECK(!b.empty(), "{}: no records to fit the collectives to", fmt::join(paths, ", "));
  const std::vector<double> x = nnls(a, b, 3);
  auto gbps = [](double ms_per_byte) {
    return ms_per_byte > 1e-6 / kUnboundedGbps ? 1e-6 / ms_per_byte : kUnboundedGbps;
  };
  c.collective_latency_us = x[0] * 1e3;
  c.collective_gbps = gbps(x[1]);
  c.allreduce_gbps = gbps(x[2]);
  c.collective_source = fmt::format("{}", fmt::join(paths, ","));
  std::vector<double> ape;  // the rows are fit / measured
  for (size_t row = 0; row < b.size(); ++row) {
    ape.push_back(100 * std::abs(a[3 * row] * x[0] + a[3 * row + 1] * x[1] +
                                 a[3 * row + 2] * x[2] - 1.0));
  }
  reporter.note(fmt::format("calibrate: collectives from {} records: {:.1f} us + bytes / {:.2f} "
                            "GB/s, all-reduce bytes / {:.2f} GB/s; median error of the fit {:.1f}% "
                            "over {} rank-directions",
                            records, c.collective_latency_us, c.collective_gbps, c.allreduce_gbps,
                            ape.empty() ? 0.0 : median(ape), ape.size()));
}

}  // namespace embshard
