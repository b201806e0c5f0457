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

namespace {

std::vector<double> doubles(const nlohmann::json& r, const char* field, size_t n,
                            const std::string& where) {
  ES_CHECK(r.contains(field) && r[field].is_array() && r[field].size() == n,
           "{}: field '{}' must be an array of {} numbers", where, field, n);
  std::vector<double> v;
  for (const auto& x : r[field]) {
    ES_CHECK(x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() >= 0,
             "{}: field '{}' holds {}, not a non-negative number", where, field, x.dump());
    v.push_back(x.get<double>());
  }
  return v;
}

}  // namespace

void fit_collectives_from_files(const std::vector<std::string>& paths, Calibration& c,
                                Reporter& reporter) {
  // One row per rank and direction, unknowns (alpha, 1/beta, 1/beta_ar), the
  // terms of analytic_collective_ms (terms.h).
  std::vector<double> a, b;
  size_t records = 0;
  for (const std::string& path : paths) {
    nlohmann::json header;
    const auto lines = RecordFile::read_all(path, &header, nullptr);
    ES_CHECK(header.value("format", "") == kCollectiveFormat,
             "{}: field 'format' is {}, expected \"{}\" (a `bench comm --collectives` file)", path,
             header.value("format", nlohmann::json()).dump(), kCollectiveFormat);
    const int64_t n = header.value("num_devices", int64_t{0});
    const double batch = header.value("batch_size", 0.0);
    ES_CHECK(n >= 2 && batch > 0, "{}: num_devices {} and batch_size {}: need >= 2 ranks", path,
             n, batch);
    const double devices = static_cast<double>(n);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string where = fmt::format("{}: record {}", path, i + 1);
      const size_t m = static_cast<size_t>(n);
      const auto rw = doubles(lines[i], "rw_dim_sums", m, where);
      const auto recv = doubles(lines[i], "index_recv_bytes", m, where);
      const auto sent = doubles(lines[i], "index_send_bytes", m, where);
      const auto fwd = doubles(lines[i], "fwd_ms", m, where);
      const auto bwd = doubles(lines[i], "bwd_ms", m, where);
      ES_CHECK(lines[i].contains("allreduce_bytes") && lines[i]["allreduce_bytes"].is_number(),
               "{}: field 'allreduce_bytes' is missing", where);
      const double allreduce = lines[i]["allreduce_bytes"].get<double>();
      double total_rw = 0, total_index = 0;
      for (size_t d = 0; d < m; ++d) total_rw += rw[d], total_index += recv[d];
      for (size_t d = 0; d < m; ++d) {
        double f_latency = 0, f_bytes = 0, b_latency = 0, b_bytes = 0, b_allreduce = 0;
        if (total_index > 0) f_latency += 1, f_bytes += std::max(recv[d], sent[d]);
        if (total_rw > 0) {
          const double bytes = alltoall_bytes(rw[d], total_rw, devices, batch).busiest();
          f_latency += devices - 1, f_bytes += bytes;
          b_latency += devices - 1, b_bytes += bytes;
        }
        if (allreduce > 0) {
          b_latency += 2 * (devices - 1);
          b_allreduce = 2 * (devices - 1) / devices * allreduce;
        }
        // Rows weighted by 1 / the measured time: relative errors, so that
        // the large all-reduces do not decide the small exchanges' fit.
        if (f_latency > 0 && fwd[d] > 0) {
          a.insert(a.end(), {f_latency / fwd[d], f_bytes / fwd[d], 0.0});
          b.push_back(1.0);
        }
        if (b_latency > 0 && bwd[d] > 0) {
          a.insert(a.end(), {b_latency / bwd[d], b_bytes / bwd[d], b_allreduce / bwd[d]});
          b.push_back(1.0);
        }
      }
    }
    records += lines.size();
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
