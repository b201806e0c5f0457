// Fits the all-to-all latency and bandwidth (alpha, beta) of the analytic
// model to a `bench comm` data file by non-negative least squares.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/alltoall.h"
#include "embshard/cost/analytic/calibrate.h"
#include "embshard/util/nnls.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/record_file.h"

namespace embshard {
namespace {

using nlohmann::json;

std::vector<double> numbers(const json& record, const char* field, size_t n,
                            const std::string& context) {
  ES_CHECK(record.contains(field) && record[field].is_array() && record[field].size() == n,
           "{}: field '{}' is missing or does not hold {} numbers", context, field, n);
  std::vector<double> v;
  for (const json& x : record[field]) {
    ES_CHECK(x.is_number() && std::isfinite(x.get<double>()),
             "{}: field '{}' holds {}, not a finite number", context, field, x.dump());
    v.push_back(x.get<double>());
  }
  return v;
}

}  // namespace

void fit_comm_from_file(const std::string& path, Calibration& c, Reporter& reporter) {
  json header;
  uint64_t dropped = 0;
  const std::vector<json> records = RecordFile::read_all(path, &header, &dropped);
  ES_CHECK(header.value("format", "") == "embshard-comm-costs",
           "{}: field 'format' is {}, expected \"embshard-comm-costs\"", path,
           header.value("format", json()).dump());
  ES_CHECK(header.contains("num_devices") && header["num_devices"].is_number_integer() &&
               header.contains("batch") && header["batch"].is_number_integer(),
           "{}: header lacks an integer 'num_devices' or 'batch'", path);
  const size_t n = header["num_devices"].get<size_t>();
  const double batch = header["batch"].get<double>();
  ES_CHECK(n >= 2, "{}: field 'num_devices' is {}: one device has no all-to-all to fit", path,
           n);
  // One row per device and direction: ms = alpha + bytes * (1/beta), where the
  // forward's wait for stragglers (max delay - own delay) is taken out first.
  std::vector<double> a, b;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string context = fmt::format("{}: record {}", path, i + 1);
    const auto dims = numbers(records[i], "dim_sums", n, context);
    const auto delays = numbers(records[i], "delays_ms", n, context);
    const auto fwd = numbers(records[i], "fwd_ms", n, context);
    const auto bwd = numbers(records[i], "bwd_ms", n, context);
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
                            path, records.size(), n, c.comm_latency_us, c.comm_gbps));
}

}  // namespace embshard
