// Table specs for planning, from files or the built-in default.
#include "embshard/workload/table_specs.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/synth.h"
#include "embshard/workload/workload.h"

namespace embshard {
namespace {

using json = nlohmann::json;

// Fills what the table object leaves out from the profile's averages.
json complete_table(json t, const PublishedStats& profile, int64_t batch_size,
                    const std::string& where) {
  ES_CHECK(t.is_object(), "{}: expected a table object, got {}", where, t.dump());
  // A misspelt field would otherwise take the profile's average unnoticed.
  // The fields are the table format's; `inspect --json` adds two derived
  // ones, which are ignored.
  static const std::vector<std::string> fields = [] {
    const json format = table_to_json(TableSpec{});  // held: items() does not own it
    std::vector<std::string> keys;
    for (const auto& [key, value] : format.items()) keys.push_back(key);
    return keys;
  }();
  for (const auto& [key, value] : t.items()) {
    ES_CHECK(std::ranges::find(fields, key) != fields.end() || key == "num_indices" ||
                 key == "weight_bytes",
             "{}: unknown field '{}' (a table's fields: {}; all but name, rows and dim optional)",
             where, key, fmt::join(fields, ", "));
  }
  if (!t.contains("pooling_factor")) t["pooling_factor"] = profile.avg_pooling_factor;
  if (!t.contains("row_reuse_histogram")) t["row_reuse_histogram"] = profile.row_reuse;
  if (!t.contains("lookup_reuse_histogram")) t["lookup_reuse_histogram"] = profile.lookup_reuse;
  // (A pooling factor out of range is left for table_from_json to name.)
  if (!t.contains("unique_rows") && t.contains("rows") && t["rows"].is_number_integer() &&
      t["pooling_factor"].is_number() && t["pooling_factor"].get<double>() >= 0 &&
      t["pooling_factor"].get<double>() <= kMaxPoolingFactor) {
    const double lookups = t["pooling_factor"].get<double>() * static_cast<double>(batch_size);
    t["unique_rows"] = std::min<int64_t>(t["rows"].get<int64_t>(),
                                         std::llround(lookups * profile.unique_ratio));
  }
  return t;
}

}  // namespace

Workload load_table_specs(const std::string& path, const std::string& profile,
                            int64_t batch_size) {
  // Plain or gzip'd, told by content.
  return parse_table_specs(read_file_gunzip(path), path, profile, batch_size);
}

Workload parse_table_specs(const std::string& text, const std::string& path,
                           const std::string& profile, int64_t batch_size) {
  const json j = parse_json_document(text, path);
  ES_CHECK(j.is_object() && j.contains("tables") && j["tables"].is_array(),
           "{}: expected an object with a 'tables' array", path);
  Workload out;
  out.source = path;
  if (batch_size > 0) {
    out.batch_size = batch_size;
  } else {
    // The costs of every table depend on it: no silent default.
    ES_CHECK(j.contains("batch_size"),
             "{}: no field 'batch_size' (the global batch the tables are looked up with, e.g. "
             "\"batch_size\": 4096)", path);
    const json& b = j["batch_size"];
    ES_CHECK(b.is_number_integer() && b.get<int64_t>() > 0 && b.get<int64_t>() <= kMaxBatch,
             "{}: field 'batch_size' is {}, must be an integer in 1..{}", path, b.dump(),
             kMaxBatch);
    out.batch_size = b.get<int64_t>();
  }
  const json name = j.contains("profile") ? j["profile"] : json(profile);
  const auto& profiles = published_profiles();
  ES_CHECK(name.is_string() && std::ranges::find(profiles, name.get<std::string>()) != profiles.end(),
           "{} is {} (valid profiles: {})",
           j.contains("profile") ? fmt::format("{}: field 'profile'", path) : "--profile",
           name.dump(), fmt::join(profiles, ", "));
  const json& tables = j["tables"];
  ES_CHECK(!tables.empty(), "{}: 'tables' is empty", path);
  // The published statistics are read only where a table leaves a field to
  // them, so that complete specs plan without the data root (util/data_dir.h).
  const bool complete = std::ranges::all_of(tables, [](const json& t) {
    return t.is_object() && t.contains("pooling_factor") && t.contains("unique_rows") &&
           t.contains("row_reuse_histogram") && t.contains("lookup_reuse_histogram");
  });
  const PublishedStats stats =
      complete ? PublishedStats{} : load_published_profile(name.get<std::string>());
  for (size_t i = 0; i < tables.size(); ++i) {
    const std::string where = fmt::format("{}: tables[{}]", path, i);
    out.tables.push_back(
        table_from_json(complete_table(tables[i], stats, out.batch_size, where), where));
  }
  check_table_names(out.tables, path);
  return out;
}

Workload default_workload(int64_t num_tables, int64_t batch_size, uint64_t seed) {
  SynthOptions o;
  o.profile = "2021";
  o.num_tables = num_tables;
  o.batch_size = batch_size;
  o.seed = seed;
  const SynthPlan plan = plan_synth(o, load_published_profile(o.profile));
  Workload out;
  out.batch_size = batch_size;
  out.source = fmt::format("built-in default: synth 2021, {} tables, batch {}, seed {}",
                           num_tables, batch_size, seed);
  // The per-bin counts synth would generate are the table's statistics; no
  // trace is needed to plan.
  for (const SynthTablePlan& p : plan.tables) {
    TableStats s;
    s.batch_size = batch_size;
    s.rows_per_bin = p.rows_per_bin;
    s.lookups_per_bin = p.lookups_per_bin;
    s.num_indices = p.num_indices();
    s.unique_rows = p.unique_rows();
    TableSpec spec;
    spec.name = p.name;
    spec.rows = p.rows;
    spec.dim = p.dim;
    fill_table_spec(s, spec);
    out.tables.push_back(spec);
  }
  return out;
}

}  // namespace embshard
