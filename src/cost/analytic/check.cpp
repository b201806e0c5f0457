// Runs the analytic model over a `bench compute` data file, for its accuracy.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/analytic/check.h"
#include "embshard/cost/analytic/model.h"
#include "embshard/util/error.h"
#include "embshard/util/record_file.h"

namespace embshard {
namespace {

using nlohmann::json;

ReuseHistogram histogram(const json& t, const char* field, const std::string& context) {
  ES_CHECK(t.contains(field) && t[field].is_array() && t[field].size() == kReuseBins,
           "{}: field '{}' is missing or does not hold {} numbers", context, field, kReuseBins);
  ReuseHistogram h{};
  for (int k = 0; k < kReuseBins; ++k) h[k] = t[field][k].get<double>();
  return h;
}

TableFeatures features_of(const json& t, const std::string& context) {
  for (const char* field : {"rows", "dim", "pooling_factor"}) {
    ES_CHECK(t.contains(field) && t[field].is_number(), "{}: field '{}' is missing", context,
             field);
  }
  TableFeatures f;
  f.rows = t["rows"].get<int64_t>();
  f.dim = t["dim"].get<int>();
  f.pooling_factor = t["pooling_factor"].get<double>();
  f.row_reuse = histogram(t, "row_reuse_histogram", context);
  f.lookup_reuse = histogram(t, "lookup_reuse_histogram", context);
  f.source_table = t.value("table", -1);
  return f;
}

}  // namespace

ComputeCheck predict_compute_file(const Calibration& c, const std::string& path) {
  json header;
  uint64_t dropped = 0;
  const std::vector<json> records = RecordFile::read_all(path, &header, &dropped);
  ES_CHECK(header.value("format", "") == "embshard-compute-costs" &&
               header.contains("batch_size") && header["batch_size"].is_number_integer(),
           "{}: not a bench compute file (format {}, batch_size {})", path,
           header.value("format", json()).dump(), header.value("batch_size", json()).dump());
  ComputeCheck check;
  check.batch_size = header["batch_size"].get<int64_t>();
  const std::shared_ptr<ComputeModel> model = make_analytic_compute_model(c, check.batch_size);
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string context = fmt::format("{}: record {}", path, i + 1);
    const json& r = records[i];
    ES_CHECK(r.contains("tables") && r["tables"].is_array() && r.contains("ms") &&
                 r["ms"].is_number(),
             "{}: field 'tables' or 'ms' is missing", context);
    std::vector<int> ids;
    for (const json& t : r["tables"]) ids.push_back(model->add_table(features_of(t, context)));
    check.predicted_ms.push_back(model->compute_ms(ids));
    check.measured_ms.push_back(r["ms"].get<double>());
  }
  return check;
}

}  // namespace embshard
