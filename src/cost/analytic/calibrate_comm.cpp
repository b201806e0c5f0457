// Fits the all-to-all latency and bandwidth (alpha, beta) of the analytic
// model to a `bench comm` data file by non-negative least squares.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/alltoall.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/analytic/calibrate.h"
#include "embshard/util/nnls.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/record_file.h"

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

}  // namespace embshard
