#include "embshard/workload/workload.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"

namespace embshard {
namespace {

using nlohmann::json;

const json& field(const json& j, const char* name, const std::string& context) {
  ES_CHECK(j.is_object(), "{}: expected an object, found {}", context, j.dump());
  auto it = j.find(name);
  ES_CHECK(it != j.end(), "{}: missing field '{}'", context, name);
  return *it;
}

int64_t positive_int(const json& j, const char* name, const std::string& context) {
  const json& v = field(j, name, context);
  ES_CHECK(v.is_number_integer(), "{}: field '{}' is {}, expected an integer", context, name,
           v.dump());
  const int64_t value = v.get<int64_t>();
  ES_CHECK(value > 0, "{}: field '{}' is {}, must be in 1..2^63-1", context, name, v.dump());
  return value;
}

double finite_number(const json& v, const std::string& what) {
  // nlohmann parses "NaN" as a string and refuses bare NaN; a number is finite.
  ES_CHECK(v.is_number(), "{} is {}, expected a number", what, v.dump());
  const double value = v.get<double>();
  ES_CHECK(std::isfinite(value), "{} is {}, must be finite", what, value);
  return value;
}

ReuseHistogram histogram(const json& j, const char* name, const std::string& context) {
  ReuseHistogram h{};
  auto it = j.find(name);
  if (it == j.end()) return h;  // optional: unknown locality
  ES_CHECK(it->is_array() && it->size() == kReuseBins,
           "{}: field '{}' must be an array of {} shares, found {}", context, name, kReuseBins,
           it->dump());
  double sum = 0;
  for (int k = 0; k < kReuseBins; ++k) {
    h[k] = finite_number((*it)[k], fmt::format("{}: {}[{}]", context, name, k));
    ES_CHECK(h[k] >= 0, "{}: {}[{}] is {}, shares must be >= 0", context, name, k, h[k]);
    sum += h[k];
  }
  ES_CHECK(sum == 0 || std::fabs(sum - 1.0) < 0.02,
           "{}: field '{}' sums to {}, shares must sum to 1", context, name, sum);
  return h;
}

}  // namespace

std::string Workload::trace_path() const {
  ES_CHECK(trace_file.has_value(), "workload '{}' has no index trace (spec only)", dir);
  return (std::filesystem::path(dir) / *trace_file).string();
}

void check_table_names(const std::vector<TableSpec>& tables, const std::string& path) {
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < tables.size(); ++i) {
    const auto [it, fresh] = index_of.emplace(tables[i].name, i);
    ES_CHECK(fresh, "{}: tables[{}]: field 'name' is '{}', as tables[{}]'s: every table needs "
             "its own name", path, i, it->first, it->second);
  }
}

TableSpec table_from_json(const json& j, const std::string& context) {
  TableSpec t;
  const json& name = field(j, "name", context);
  ES_CHECK(name.is_string() && !name.get<std::string>().empty(),
           "{}: field 'name' is {}, expected a non-empty string", context, name.dump());
  t.name = name.get<std::string>();
  const std::string where = fmt::format("{} ('{}')", context, t.name);
  t.rows = positive_int(j, "rows", where);
  // Past kMaxRows a table is a typo, and its byte counts overflow int64.
  ES_CHECK(t.rows <= kMaxRows, "{}: field 'rows' is {}, must be in 1..{}", where, t.rows,
           kMaxRows);
  const int64_t dim = positive_int(j, "dim", where);
  ES_CHECK(dim <= 1024, "{}: field 'dim' is {}, must be in 1..1024", where, dim);
  t.dim = static_cast<int>(dim);
  t.pooling_factor =
      finite_number(field(j, "pooling_factor", where), where + ": field 'pooling_factor'");
  ES_CHECK(t.pooling_factor >= 0 && t.pooling_factor <= kMaxPoolingFactor,
           "{}: field 'pooling_factor' is {}, must be in 0..{:g}", where, t.pooling_factor,
           kMaxPoolingFactor);
  if (auto it = j.find("unique_rows"); it != j.end()) {
    ES_CHECK(it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() <= t.rows,
             "{}: field 'unique_rows' is {}, must be an integer in 0..rows ({})", where,
             it->dump(), t.rows);
    t.unique_rows = it->get<int64_t>();
  }
  t.row_reuse = histogram(j, "row_reuse_histogram", where);
  t.lookup_reuse = histogram(j, "lookup_reuse_histogram", where);
  if (auto it = j.find("data_type"); it != j.end()) {
    ES_CHECK(it->is_string(), "{}: field 'data_type' is {}, expected a string ({})", where,
             it->dump(), fmt::join(data_type_names(), ", "));
    t.data_type = parse_data_type(it->get<std::string>(), where + ": field 'data_type'");
  }
  return t;
}

json table_to_json(const TableSpec& t) {
  return json{{"name", t.name},
              {"rows", t.rows},
              {"dim", t.dim},
              {"pooling_factor", t.pooling_factor},
              {"unique_rows", t.unique_rows},
              {"row_reuse_histogram", t.row_reuse},
              {"lookup_reuse_histogram", t.lookup_reuse},
              {"data_type", data_type_name(t.data_type)}};
}

Workload load_workload(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / kTablesFile).string();
  ES_CHECK(std::filesystem::exists(dir), "workload '{}': no such directory", dir);
  ES_CHECK(std::filesystem::is_directory(dir),
           "workload '{}': a file, not a workload directory (`embshard synth` or `import` makes "
           "one; a table spec file is read with --tables FILE)",
           dir);
  ES_CHECK(file_exists(path), "workload '{}': no {} (is it a workload directory?)", dir,
           kTablesFile);
  const json j = parse_json_document(read_file(path), path);
  Workload w;
  w.dir = dir;
  const json& format = field(j, "format", path);
  ES_CHECK(format == "embshard-workload", "{}: field 'format' is {}, expected \"embshard-workload\"",
           path, format.dump());
  const json& version = field(j, "version", path);
  ES_CHECK(version == 1, "{}: field 'version' is {}, this build reads version 1", path,
           version.dump());
  w.batch_size = positive_int(j, "batch_size", path);
  ES_CHECK(w.batch_size <= kMaxBatch, "{}: field 'batch_size' is {}, must be in 1..{}", path,
           w.batch_size, kMaxBatch);
  if (auto it = j.find("source"); it != j.end() && it->is_string()) w.source = it->get<std::string>();
  const json& tables = field(j, "tables", path);
  ES_CHECK(tables.is_array(), "{}: field 'tables' must be an array", path);
  for (size_t i = 0; i < tables.size(); ++i) {
    w.tables.push_back(table_from_json(tables[i], fmt::format("{}: tables[{}]", path, i)));
  }
  check_table_names(w.tables, path);
  if (auto it = j.find("trace"); it != j.end() && !it->is_null()) {
    ES_CHECK(it->is_string(), "{}: field 'trace' is {}, expected a file name or null", path,
             it->dump());
    w.trace_file = it->get<std::string>();
    TraceReader reader(w.trace_path());
    ES_CHECK(reader.info().num_tables == w.tables.size(),
             "{}: {} tables, but trace '{}' holds {}", path, w.tables.size(), w.trace_path(),
             reader.info().num_tables);
    ES_CHECK(reader.info().batch_size == static_cast<uint64_t>(w.batch_size),
             "{}: batch_size {}, but trace '{}' has batch size {}", path, w.batch_size,
             w.trace_path(), reader.info().batch_size);
  }
  return w;
}

void save_workload_specs(const Workload& w, const std::string& dir) {
  std::filesystem::create_directories(dir);
  json tables = json::array();
  for (const TableSpec& t : w.tables) tables.push_back(table_to_json(t));
  json j{{"format", "embshard-workload"},
         {"version", 1},
         {"batch_size", w.batch_size},
         {"source", w.source},
         {"trace", w.trace_file ? json(*w.trace_file) : json(nullptr)},
         {"tables", tables}};
  write_file_atomic((std::filesystem::path(dir) / kTablesFile).string(), j.dump(1) + "\n");
}

}  // namespace embshard
