// The calibration file written by `embshard calibrate` and read by the
// analytic model: one JSON object, every coefficient with its unit in its name.
#include <cmath>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/machine.h"
#include "embshard/workload/data_type.h"

namespace embshard {
namespace {

using nlohmann::json;

// One numeric coefficient: its JSON name, where it lives, and whether zero is
// a legal value (overheads may fit to zero; bandwidths may not).
struct Field {
  const char* name;
  double Calibration::*member;
  bool may_be_zero;
};

constexpr Field kFields[] = {
    {"fwd_call_us", &Calibration::fwd_call_us, true},
    {"fwd_per_table_us", &Calibration::fwd_per_table_us, true},
    {"fwd_per_lookup_ns", &Calibration::fwd_per_lookup_ns, true},
    {"dram_gather_gbps", &Calibration::dram_gather_gbps, false},
    {"cache_gather_gbps", &Calibration::cache_gather_gbps, false},
    {"seq_gbps", &Calibration::seq_gbps, false},
    {"generic_dim_ns_per_element", &Calibration::generic_dim_ns_per_element, true},
    {"fwd_page_walk_ns", &Calibration::fwd_page_walk_ns, true},
    {"bwd_page_walk_ns", &Calibration::bwd_page_walk_ns, true},
    {"bwd_call_us", &Calibration::bwd_call_us, true},
    {"bwd_per_table_us", &Calibration::bwd_per_table_us, true},
    {"bwd_per_lookup_ns", &Calibration::bwd_per_lookup_ns, true},
    {"sort_ns_per_lookup_pass", &Calibration::sort_ns_per_lookup_pass, true},
    {"grad_read_gbps", &Calibration::grad_read_gbps, false},
    {"dram_update_gbps", &Calibration::dram_update_gbps, false},
    {"cache_update_gbps", &Calibration::cache_update_gbps, false},
    {"comm_latency_us", &Calibration::comm_latency_us, true},
    {"comm_gbps", &Calibration::comm_gbps, false},
    {"fwd_fit_rms_pct", &Calibration::fwd_fit_rms_pct, true},
    {"bwd_fit_rms_pct", &Calibration::bwd_fit_rms_pct, true},
    {"calibration_s", &Calibration::calibration_s, true},
};

// 0: as the all-to-all's comm_latency_us / comm_gbps.
constexpr Field kCollectiveFields[] = {
    {"collective_latency_us", &Calibration::collective_latency_us, true},
    {"collective_gbps", &Calibration::collective_gbps, true},
    {"allreduce_gbps", &Calibration::allreduce_gbps, true},
};
// Optional, at the top and in every collectives_by_ranks entry: files from
// before the forward had its own constants have none (0: the backward's).
constexpr Field kForwardCollectiveFields[] = {
    {"collective_fwd_latency_us", &Calibration::collective_fwd_latency_us, true},
    {"index_gbps", &Calibration::index_gbps, true},
    {"reduce_scatter_gbps", &Calibration::reduce_scatter_gbps, true},
};

// The conversion coefficients by their JSON names, each an object by type.
template <typename C>
auto conversion_fields(C& c) {
  return std::array{std::pair{"fwd_convert_ns_per_element", &c.fwd_convert_ns},
                    std::pair{"fwd_convert_ns_per_lookup", &c.fwd_convert_lookup_ns}};
}

const json& require(const json& j, const char* field, const std::string& context) {
  ES_CHECK(j.contains(field), "{}: field '{}' is missing", context, field);
  return j.at(field);
}

double number(const json& j, const Field& f, const std::string& context) {
  const json& v = require(j, f.name, context);
  // NaN and inf are written by nlohmann as null, and a string is never a number.
  ES_CHECK(v.is_number(), "{}: field '{}' is {}, not a number", context, f.name, v.dump());
  const double x = v.get<double>();
  ES_CHECK(std::isfinite(x) && (f.may_be_zero ? x >= 0 : x > 0),
           "{}: field '{}' is {}, must be a finite {} number", context, f.name, x,
           f.may_be_zero ? "non-negative" : "positive");
  return x;
}

int64_t integer(const json& j, const char* field, int64_t min_value,
                const std::string& context) {
  const json& v = require(j, field, context);
  ES_CHECK(v.is_number_integer() && v.get<int64_t>() >= min_value,
           "{}: field '{}' is {}, must be an integer >= {}", context, field, v.dump(),
           min_value);
  return v.get<int64_t>();
}

}  // namespace

json calibration_to_json(const Calibration& c) {
  json j = {{"format", kCalibrationFormat},
            {"version", kCalibrationVersion},
            {"embshard_version", EMBSHARD_VERSION},
            {"machine", {{"cpu", c.machine_cpu}}},
            {"threads", c.threads},
            {"executor", c.executor},
            {"batch_size", c.batch_size},
            {"cache_bytes", c.cache_bytes},
            {"comm_source", c.comm_source}};
  for (const Field& f : kFields) j[f.name] = c.*(f.member);
  for (const Field& f : kCollectiveFields) j[f.name] = c.*(f.member);
  for (const Field& f : kForwardCollectiveFields) j[f.name] = c.*(f.member);
  for (const auto& [name, values] : conversion_fields(c)) {
    json by_type = json::object();
    for (size_t i = 0; i < values->size(); ++i) by_type[data_type_names()[i + 1]] = (*values)[i];
    j[name] = by_type;
  }
  j["collective_source"] = c.collective_source;
  if (!c.collectives_by_ranks.empty()) {
    json by_ranks = json::array();
    for (const auto& r : c.collectives_by_ranks) {
      by_ranks.push_back({{"ranks", r.ranks},
                          {"batch_size", r.batch_size},
                          {"collective_latency_us", r.latency_us},
                          {"collective_gbps", r.gbps},
                          {"allreduce_gbps", r.allreduce_gbps},
                          {"collective_fwd_latency_us", r.fwd_latency_us},
                          {"index_gbps", r.index_gbps},
                          {"reduce_scatter_gbps", r.reduce_scatter_gbps}});
    }
    j["collectives_by_ranks"] = by_ranks;
  }
  return j;
}

Calibration calibration_from_json(const json& j, const std::string& context) {
  ES_CHECK(j.is_object(), "{}: not a JSON object", context);
  const json& format = require(j, "format", context);
  ES_CHECK(format == kCalibrationFormat, "{}: field 'format' is {}, expected \"{}\"", context,
           format.dump(), kCalibrationFormat);
  const json& version = require(j, "version", context);
  ES_CHECK(version == kCalibrationVersion,
           "{}: field 'version' is {}, this embshard reads version {} (rerun embshard "
           "calibrate)",
           context, version.dump(), kCalibrationVersion);
  Calibration c;
  const json& machine = require(j, "machine", context);
  ES_CHECK(machine.is_object() && machine.contains("cpu") && machine["cpu"].is_string(),
           "{}: field 'machine' is {}, expected {{\"cpu\": \"...\"}}", context, machine.dump());
  c.machine_cpu = machine["cpu"].get<std::string>();
  c.threads = static_cast<int>(integer(j, "threads", 1, context));
  if (j.contains("executor")) {
    ES_CHECK(j["executor"].is_string(), "{}: field 'executor' is {}, not a string", context,
             j["executor"].dump());
    c.executor = j["executor"].get<std::string>();
  } else {
    c.executor = cpu_executor_name(c.threads, false);
  }
  c.batch_size = integer(j, "batch_size", 1, context);
  c.cache_bytes = integer(j, "cache_bytes", 0, context);
  const json& source = require(j, "comm_source", context);
  ES_CHECK(source.is_string(), "{}: field 'comm_source' is {}, not a string", context,
           source.dump());
  c.comm_source = source.get<std::string>();
  for (const Field& f : kFields) c.*(f.member) = number(j, f, context);
  // Optional: files from before the collectives were fitted have none.
  for (const auto& fields : {std::span<const Field>(kCollectiveFields),
                             std::span<const Field>(kForwardCollectiveFields)}) {
    for (const Field& f : fields) {
      if (j.contains(f.name)) c.*(f.member) = number(j, f, context);
    }
  }
  for (const auto& [name, values] : conversion_fields(c)) {  // optional: 0 in older files
    if (!j.contains(name)) continue;
    const std::string where = fmt::format("{}: field '{}'", context, name);
    const json& by_type = j[name];
    ES_CHECK(by_type.is_object(), "{} is {}, not an object", where, by_type.dump());
    for (size_t i = 0; i < values->size(); ++i) {
      const std::string& type = data_type_names()[i + 1];
      if (by_type.contains(type)) {
        (*values)[i] = number(by_type, Field{type.c_str(), nullptr, true}, where);
      }
    }
  }
  if (j.contains("collective_source")) {
    ES_CHECK(j["collective_source"].is_string(),
             "{}: field 'collective_source' is {}, not a string", context,
             j["collective_source"].dump());
    c.collective_source = j["collective_source"].get<std::string>();
  }
  const json by_ranks = j.value("collectives_by_ranks", json::array());
  ES_CHECK(by_ranks.is_array(), "{}: field 'collectives_by_ranks' is {}, not an array", context,
           by_ranks.dump());
  for (size_t i = 0; i < by_ranks.size(); ++i) {
    const std::string where = fmt::format("{}: collectives_by_ranks[{}]", context, i);
    ES_CHECK(by_ranks[i].is_object(), "{} is {}, not an object", where, by_ranks[i].dump());
    Calibration fitted;  // the entry's fields, read as the top-level ones
    for (const Field& f : kCollectiveFields) fitted.*(f.member) = number(by_ranks[i], f, where);
    for (const Field& f : kForwardCollectiveFields) {
      if (by_ranks[i].contains(f.name)) fitted.*(f.member) = number(by_ranks[i], f, where);
    }
    const int ranks = static_cast<int>(integer(by_ranks[i], "ranks", 2, where));
    const int64_t batch = integer(by_ranks[i], "batch_size", 1, where);
    ES_CHECK(c.collectives_by_ranks.empty() ||
                 std::pair(ranks, batch) > std::pair(c.collectives_by_ranks.back().ranks,
                                                     c.collectives_by_ranks.back().batch_size),
             "{}: ranks {} and batch_size {}: entries must be in ascending (ranks, batch_size) "
             "order, each once",
             where, ranks, batch);
    c.collectives_by_ranks.push_back({ranks, batch, fitted.collective_latency_us,
                                      fitted.collective_gbps, fitted.allreduce_gbps,
                                      fitted.collective_fwd_latency_us, fitted.index_gbps,
                                      fitted.reduce_scatter_gbps});
  }
  return c;
}

void save_calibration(const Calibration& c, const std::string& path) {
  write_file_atomic(path, calibration_to_json(c).dump(2) + "\n");
}

Calibration load_calibration(const std::string& path) {
  const std::string text = read_file(path);
  const json j = parse_json_document(text, path);
  // value(key, json()): a format of another type is calibration_from_json's
  // error naming it, not a type error here.
  ES_CHECK(!j.is_object() || j.value("format", json()) != "embshard-comm-constants",
           "{}: a model set's all-to-all constants, not an analytic calibration: the analytic "
           "compute model needs `embshard calibrate`'s file (--calibration FILE); the set's own "
           "models are --cost-model neural",
           path);
  return calibration_from_json(j, path);
}

Calibration load_comm_constants(const std::string& path) {
  const json j = parse_json_document(read_file(path), path);
  ES_CHECK(j.is_object() && j.value("format", json()) == kCommConstantsFormat &&
               j.value("version", json()) == 1,
           "{}: not an {} version 1 file ({})", path, kCommConstantsFormat,
           j.is_object() ? fmt::format("format {}, version {}", j.value("format", json()).dump(),
                                       j.value("version", json()).dump())
                         : "not a JSON object");
  Calibration c;
  for (const auto& [field, target] :
       {std::pair<const char*, double*>{"latency_us", &c.comm_latency_us}, {"gbps", &c.comm_gbps}}) {
    ES_CHECK(j.contains(field) && j[field].is_number() && std::isfinite(j[field].get<double>()) &&
                 j[field].get<double>() > 0,
             "{}: field '{}' is {}, must be a positive number", path, field,
             j.value(field, json()).dump());
    *target = j[field].get<double>();
  }
  ES_CHECK(j.contains("source") && j["source"].is_string(),
           "{}: field 'source' (where the constants come from) is missing", path);
  c.comm_source = j["source"].get<std::string>();
  c.machine_cpu.clear();
  return c;
}

}  // namespace embshard
