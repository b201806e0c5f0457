// The plan JSON reader: every field checked, every error naming the file, the
// field and the value.
#include "embshard/plan/plan_file.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/plan/report.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"

namespace embshard {
namespace {

using json = nlohmann::json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kIntMax = std::numeric_limits<int>::max();
// Limits far past any real plan (the largest public tables have ~1e9 rows and
// dim <= 1024) that keep every byte count of a plan, rows x (4 dim + 4) per
// piece summed over pieces and copies, well inside int64: a damaged or
// hostile file cannot make a consumer's arithmetic overflow.
constexpr int64_t kMaxRows = int64_t{1} << 40;
constexpr int64_t kMaxDim = int64_t{1} << 16;
constexpr int64_t kMaxPlanValues = int64_t{1} << 50;  // rows x dim over tables and replicas

const char* const kShardingTypes[] = {"table_wise",        "column_wise",    "row_wise",
                                      "table_column_wise", "table_row_wise", "grid_shard",
                                      "data_parallel"};
// TorchRec's training kernels for a sharded (not data-parallel) table.
const char* const kShardedKernels[] = {"fused", "fused_uvm", "fused_uvm_caching", "key_value"};

// A value as a message shows it. Containers by kind and size only: a damaged
// file can hold a value of any size or depth, and dumping it would flood the
// message (or recurse as deep as the file nests).
std::string show(const json& v) {
  if (v.is_object()) return fmt::format("an object of {} fields", v.size());
  if (v.is_array()) return fmt::format("an array of {} values", v.size());
  return json_shown(v, 64);
}

std::string member_path(const std::string& where, const std::string& name) {
  return where.empty() ? name : where + "." + name;
}

std::string index_path(const std::string& where, size_t i) {
  return fmt::format("{}[{}]", where, i);
}

// Typed access with messages that carry the source and the field's path.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }

  // Member `name` of the object `obj`, found at path `where` ("" for the top).
  const json& member(const json& obj, const std::string& where, const std::string& name) const {
    ES_CHECK(obj.is_object(), "{}: field '{}' is {}, expected an object", source_,
             where.empty() ? "(top level)" : where, show(obj));
    const auto it = obj.find(name);
    ES_CHECK(it != obj.end(), "{}: missing field '{}'", source_, member_path(where, name));
    return *it;
  }

  int64_t integer(const json& v, const std::string& field, int64_t min, int64_t max) const {
    ES_CHECK(v.is_number_integer(), "{}: field '{}' is {}, expected an integer", source_, field,
             show(v));
    // JSON keeps integers past int64 as unsigned; get<int64_t> would wrap them.
    ES_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(kInt64Max),
             "{}: field '{}' is {}, expected {}..{}", source_, field, show(v), min, max);
    const int64_t x = v.get<int64_t>();
    ES_CHECK(x >= min && x <= max, "{}: field '{}' is {}, expected {}..{}", source_, field, x, min,
             max);
    return x;
  }

  double number(const json& v, const std::string& field) const {
    ES_CHECK(v.is_number(), "{}: field '{}' is {}, expected a number", source_, field, show(v));
    const double x = v.get<double>();
    ES_CHECK(std::isfinite(x), "{}: field '{}' is {}, expected a finite number", source_, field,
             show(v));
    return x;
  }

  std::string string(const json& v, const std::string& field) const {
    ES_CHECK(v.is_string(), "{}: field '{}' is {}, expected a string", source_, field, show(v));
    return v.get<std::string>();
  }

  const json& array(const json& v, const std::string& field) const {
    ES_CHECK(v.is_array(), "{}: field '{}' is {}, expected an array", source_, field, show(v));
    return v;
  }

  // Shorthands for a member of an object at `where`.
  int64_t integer_at(const json& obj, const std::string& where, const std::string& name,
                     int64_t min, int64_t max) const {
    return integer(member(obj, where, name), member_path(where, name), min, max);
  }
  double number_at(const json& obj, const std::string& where, const std::string& name) const {
    return number(member(obj, where, name), member_path(where, name));
  }
  // A time, share or count: a number >= 0.
  double non_negative_at(const json& obj, const std::string& where,
                         const std::string& name) const {
    const double v = number_at(obj, where, name);
    ES_CHECK(v >= 0, "{}: field '{}' is {}, must be >= 0", source_, member_path(where, name), v);
    return v;
  }
  std::string string_at(const json& obj, const std::string& where, const std::string& name) const {
    return string(member(obj, where, name), member_path(where, name));
  }

 private:
  std::string source_;
};

// Digits only (no sign, no spaces), into an int; false if not.
bool parse_digits(std::string_view text, int& out) {
  if (text.empty() || text.size() > 9) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// "rank:N/cuda:M" (what plan_to_json writes) or "rank:N/cpu" (what the
// TorchRec bridge writes for CPU runs); the device is the rank N. False if
// the text has neither form.
bool parse_placement(std::string_view text, int& rank) {
  constexpr std::string_view kRank = "rank:";
  if (text.substr(0, kRank.size()) != kRank) return false;
  text.remove_prefix(kRank.size());
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos || !parse_digits(text.substr(0, slash), rank)) return false;
  const std::string_view device = text.substr(slash + 1);
  constexpr std::string_view kCuda = "cuda:";
  int index = 0;
  if (device.substr(0, kCuda.size()) == kCuda) {
    return parse_digits(device.substr(kCuda.size()), index);
  }
  return device == "cpu";
}

// [a, b] of two non-negative integers (offsets) or two positive ones (sizes).
std::pair<int64_t, int64_t> read_pair(const Reader& r, const json& shard, const std::string& where,
                                      const std::string& name, int64_t min) {
  const std::string field = member_path(where, name);
  const json& v = r.array(r.member(shard, where, name), field);
  ES_CHECK(v.size() == 2, "{}: field '{}' is {}, expected [rows, cols]", r.source(), field,
           show(v));
  return {r.integer(v[0], index_path(field, 0), min, kInt64Max),
          r.integer(v[1], index_path(field, 1), min, kIntMax)};
}

PlanFileShard read_shard(const Reader& r, const json& s, const std::string& where,
                         const PlanFileTable& t, int num_devices) {
  PlanFileShard out;
  const auto [row_offset, col_offset] = read_pair(r, s, where, "shard_offsets", 0);
  const auto [rows, cols] = read_pair(r, s, where, "shard_sizes", 1);
  out.row_offset = row_offset;
  out.rows = rows;
  out.col_offset = static_cast<int>(col_offset);
  out.cols = static_cast<int>(cols);
  // Written without overflow: offsets and sizes can each be near int64's end.
  ES_CHECK(out.row_offset <= t.rows && out.rows <= t.rows - out.row_offset &&
               out.col_offset <= t.dim && out.cols <= t.dim - out.col_offset,
           "{}: field '{}' is rows {}..{} x cols {}..{}, outside table '{}' ({} rows x dim {})",
           r.source(), where, out.row_offset, out.row_offset + out.rows, out.col_offset,
           out.col_offset + out.cols, t.name, t.rows, t.dim);
  const std::string field = member_path(where, "placement");
  const std::string placement = r.string(r.member(s, where, "placement"), field);
  ES_CHECK(parse_placement(placement, out.device),
           "{}: field '{}' is {}, expected \"rank:N/cuda:N\"", r.source(), field,
           show(json(placement)));
  ES_CHECK(out.device < num_devices,
           "{}: field '{}' is \"{}\": rank {} is outside 0..{} ({} devices)", r.source(), field,
           placement, out.device, num_devices - 1, num_devices);
  return out;
}

// Shards inside the table (read_shard) that do not overlap and whose areas
// add up to the table's cover it exactly once. Pairwise: plans cut a table
// into a few dozen pieces at most.
void check_cover(const Reader& r, const std::string& where, const PlanFileTable& t) {
  const int64_t area = t.rows * t.dim;  // < 2^56: see kMaxRows
  int64_t covered = 0;
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const PlanFileShard& a = t.shards[i];
    for (size_t j = 0; j < i; ++j) {
      const PlanFileShard& b = t.shards[j];
      const bool rows_meet =
          a.row_offset < b.row_offset + b.rows && b.row_offset < a.row_offset + a.rows;
      const bool cols_meet =
          a.col_offset < b.col_offset + b.cols && b.col_offset < a.col_offset + a.cols;
      ES_CHECK(!(rows_meet && cols_meet), "{}: field '{}': shards[{}] and shards[{}] overlap",
               r.source(), where, j, i);
    }
    covered += a.rows * a.cols;  // disjoint pieces inside the table: at most `area`
  }
  ES_CHECK(covered == area, "{}: field '{}': the shards cover {} of the {} values of table '{}'",
           r.source(), where, covered, area, t.name);
}

// Shards shaped as the table's sharding type says: TorchRec builds a table's
// shards from its type, so a row block labelled column_wise loads as another
// plan than the one written.
void check_shapes(const Reader& r, const std::string& where, const PlanFileTable& t) {
  const std::string& type = t.sharding_type;
  ES_CHECK(type != "table_wise" || t.shards.size() == 1,
           "{}: field '{}' has {} shards: a table_wise table is one shard", r.source(), where,
           t.shards.size());
  const bool whole_rows = type == "column_wise" || type == "table_column_wise";
  const bool whole_cols = type == "row_wise" || type == "table_row_wise";
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const PlanFileShard& s = t.shards[i];
    ES_CHECK(!whole_rows || (s.row_offset == 0 && s.rows == t.rows),
             "{}: field '{}' holds rows {}..{} of {}: a {} shard holds every row (a range of "
             "columns)",
             r.source(), index_path(where, i), s.row_offset, s.row_offset + s.rows, t.rows, type);
    ES_CHECK(!whole_cols || (s.col_offset == 0 && s.cols == t.dim),
             "{}: field '{}' holds columns {}..{} of {}: a {} shard holds every column (a range "
             "of rows)",
             r.source(), index_path(where, i), s.col_offset, s.col_offset + s.cols, t.dim, type);
  }
}

PlanFileTable read_table(const Reader& r, const std::string& name, const json& j, int num_devices,
                         int version) {
  const std::string where = member_path("tables", name);
  PlanFileTable t;
  t.name = name;
  t.sharding_type = r.string_at(j, where, "sharding_type");
  ES_CHECK(std::find(std::begin(kShardingTypes), std::end(kShardingTypes), t.sharding_type) !=
               std::end(kShardingTypes),
           "{}: field '{}' is {}, expected one of table_wise, column_wise, row_wise, "
           "table_column_wise, table_row_wise, grid_shard, data_parallel",
           r.source(), member_path(where, "sharding_type"), show(json(t.sharding_type)));
  t.compute_kernel = r.string_at(j, where, "compute_kernel");
  // TorchRec's EmbeddingComputeKernel values: "dense" is data parallel's.
  const bool dense = t.sharding_type == "data_parallel";
  ES_CHECK(dense ? t.compute_kernel == "dense"
                 : std::find(std::begin(kShardedKernels), std::end(kShardedKernels),
                             t.compute_kernel) != std::end(kShardedKernels),
           "{}: field '{}' is {}, expected {} for a {} table", r.source(),
           member_path(where, "compute_kernel"), show(json(t.compute_kernel)),
           dense ? "\"dense\"" : "one of fused, fused_uvm, fused_uvm_caching, key_value",
           t.sharding_type);
  t.dim = static_cast<int>(r.integer_at(j, where, "dim", 1, kMaxDim));
  t.rows = r.integer_at(j, where, "rows", 1, kMaxRows);
  if (version > 1) {
    // The names as written (lower case), as the Python reader takes them.
    const json& type = r.member(j, where, "data_type");
    const std::vector<std::string>& names = data_type_names();
    const auto it = type.is_string()
                        ? std::find(names.begin(), names.end(), type.get<std::string>())
                        : names.end();
    ES_CHECK(it != names.end(), "{}: field '{}' is {}, expected one of {}", r.source(),
             member_path(where, "data_type"), show(type), fmt::join(names, ", "));
    t.data_type = static_cast<DataType>(it - names.begin());
  }
  t.memory_bytes = r.integer_at(j, where, "memory_bytes", 0, kInt64Max);
  const std::string ranks_field = member_path(where, "ranks");
  const json& ranks = r.array(r.member(j, where, "ranks"), ranks_field);
  for (size_t i = 0; i < ranks.size(); ++i) {
    t.ranks.push_back(
        static_cast<int>(r.integer(ranks[i], index_path(ranks_field, i), 0, num_devices - 1)));
  }
  const std::string shards_field = member_path(where, "shards");
  const json& shards = r.member(j, where, "shards");
  if (t.replicated()) {
    ES_CHECK(shards.is_null(), "{}: field '{}' is {}, expected null for a data_parallel table",
             r.source(), shards_field, show(shards));
    ES_CHECK(!t.ranks.empty(), "{}: field '{}' is empty: a data_parallel table needs a device",
             r.source(), ranks_field);
    std::set<int> seen;
    for (int d : t.ranks) {
      ES_CHECK(seen.insert(d).second, "{}: field '{}' lists device {} twice", r.source(),
               ranks_field, d);
    }
    // TorchRec replicates a data-parallel table on every rank.
    ES_CHECK(static_cast<int>(t.ranks.size()) == num_devices,
             "{}: field '{}' lists {} of the {} devices: a data_parallel table is on every device",
             r.source(), ranks_field, t.ranks.size(), num_devices);
    return t;
  }
  r.array(shards, shards_field);
  ES_CHECK(!shards.empty(), "{}: field '{}' is empty: the table has no shard", r.source(),
           shards_field);
  ES_CHECK(shards.size() == t.ranks.size(),
           "{}: field '{}' has {} ranks for {} shards, expected one rank per shard", r.source(),
           ranks_field, t.ranks.size(), shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string field = index_path(shards_field, i);
    t.shards.push_back(read_shard(r, shards[i], field, t, num_devices));
    ES_CHECK(t.ranks[i] == t.shards.back().device,
             "{}: field '{}' is {} but {}.placement says rank {}", r.source(),
             index_path(ranks_field, i), t.ranks[i], field, t.shards.back().device);
  }
  check_shapes(r, shards_field, t);
  check_cover(r, shards_field, t);
  if (t.sharding_type == "row_wise") {
    // TorchRec sends the lookups of row block b to rank b.
    const int64_t block = (t.rows + num_devices - 1) / num_devices;
    for (size_t i = 0; i < t.shards.size(); ++i) {
      const PlanFileShard& s = t.shards[i];
      ES_CHECK(s.row_offset / block == s.device,
               "{}: field '{}' holds rows {}..{} on rank {}: in a row_wise table TorchRec "
               "serves row block b (rows b x {} onwards) from rank b",
               r.source(), index_path(shards_field, i), s.row_offset, s.row_offset + s.rows,
               s.device, block);
    }
  }
  return t;
}

PlanFileDevice read_device(const Reader& r, const json& j, const std::string& where) {
  PlanFileDevice d;
  d.memory_bytes = r.integer_at(j, where, "memory_bytes", 0, kInt64Max);
  d.memory_fraction = r.non_negative_at(j, where, "memory_fraction");
  d.compute_ms = r.non_negative_at(j, where, "compute_ms");
  d.fwd_comm_ms = r.non_negative_at(j, where, "fwd_comm_ms");
  d.bwd_comm_ms = r.non_negative_at(j, where, "bwd_comm_ms");
  d.total_ms = r.non_negative_at(j, where, "total_ms");
  d.num_shards = static_cast<int>(r.integer_at(j, where, "num_shards", 0, kIntMax));
  d.dim_sum = r.non_negative_at(j, where, "dim_sum");
  return d;
}

Topology read_topology(const Reader& r, const json& j, int num_devices) {
  const std::string where = "topology";
  Topology t;
  t.devices_per_host =
      static_cast<int>(r.integer_at(j, where, "devices_per_host", 1, num_devices - 1));
  t.inter_host_gbps = r.non_negative_at(j, where, "inter_host_gbps");
  t.inter_host_latency_us = r.non_negative_at(j, where, "inter_host_latency_us");
  ES_CHECK(t.inter_host_gbps > 0, "{}: field 'topology.inter_host_gbps' is {}, must be more than 0",
           r.source(), t.inter_host_gbps);
  return t;
}

PlanFilePrediction read_prediction(const Reader& r, const json& top, int num_devices) {
  const std::string where = "predicted";
  const json& j = r.member(top, "", where);
  PlanFilePrediction p;
  p.cost_ms = r.non_negative_at(j, where, "cost_ms");
  p.critical_device =
      static_cast<int>(r.integer_at(j, where, "critical_device", 0, num_devices - 1));
  p.imbalance = r.non_negative_at(j, where, "imbalance");
  p.lower_bound_ms = r.non_negative_at(j, where, "lower_bound_ms");
  p.gap = r.number_at(j, where, "gap");
  p.search_s = r.non_negative_at(j, where, "search_s");
  const std::string field = member_path(where, "devices");
  const json& devices = r.array(r.member(j, where, "devices"), field);
  ES_CHECK(devices.size() == static_cast<size_t>(num_devices),
           "{}: field '{}' has {} devices, expected num_devices = {}", r.source(), field,
           devices.size(), num_devices);
  for (size_t d = 0; d < devices.size(); ++d) {
    p.devices.push_back(read_device(r, devices[d], index_path(field, d)));
  }
  return p;
}

// With the file's memory_model: each table's memory_bytes is what its shards
// (or replicas) hold, and no device holds more than its capacity. A plan
// edited by hand (a shard moved onto a full device) fails here, not on the
// GPU.
void check_memory(const Reader& r, const json& model, int version, PlanFile& p) {
  ES_CHECK(model.is_object(), "{}: field 'memory_model' is {}, expected an object", r.source(),
           show(model));
  if (version == 1) {  // fp32 tables: bytes_per_weight is 4, checked
    r.integer_at(model, "memory_model", "bytes_per_weight", 4, 4);
  } else {
    p.memory.optimizer_bytes_per_weight =
        r.integer_at(model, "memory_model", "optimizer_bytes_per_weight", 0, 1024);
  }
  p.memory.optimizer_bytes_per_row =
      r.integer_at(model, "memory_model", "optimizer_bytes_per_row", 0, 1024);
  p.has_memory_model = true;
  std::vector<int64_t> used(p.num_devices, 0);
  std::vector<std::vector<std::string>> on(p.num_devices);
  for (const PlanFileTable& t : p.tables) {
    // The plan holds at most kMaxPlanValues (2^50) values, replicas counted,
    // and no more rows than values: every sum stays below 2^60.
    const auto bytes = [&](int64_t rows, int64_t cols) {
      return p.memory.shard_bytes(t.data_type, rows, cols);
    };
    int64_t held = 0;
    if (t.replicated()) {
      for (int d : t.ranks) {
        used[d] += bytes(t.rows, t.dim);
        on[d].push_back(t.name);
      }
      held = bytes(t.rows, t.dim) * static_cast<int64_t>(t.ranks.size());
    } else {
      for (const PlanFileShard& s : t.shards) {
        used[s.device] += bytes(s.rows, s.cols);
        on[s.device].push_back(t.name);
        held += bytes(s.rows, s.cols);
      }
    }
    ES_CHECK(held == t.memory_bytes,
             "{}: field 'tables.{}.memory_bytes' is {}, but its shards hold {} bytes under "
             "'memory_model'",
             r.source(), t.name, t.memory_bytes, held);
  }
  for (int d = 0; d < p.num_devices; ++d) {
    ES_CHECK(used[d] <= p.device_memory_bytes[d],
             "{}: rank {} holds {} bytes of shards ({}), past its capacity device_memory_bytes[{}] "
             "= {}",
             r.source(), d, used[d], fmt::join(on[d], ", "), d, p.device_memory_bytes[d]);
  }
}

// The tables in `table_order` when the file has it (checked to list each
// table once), else in name order (how JSON objects are read back).
std::vector<std::string> table_order(const Reader& r, const json& top, const json& tables) {
  std::vector<std::string> order;
  const auto it = top.find("table_order");
  if (it == top.end()) {
    for (const auto& [name, _] : tables.items()) order.push_back(name);
    return order;
  }
  const json& list = r.array(*it, "table_order");
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = index_path("table_order", i);
    const std::string name = r.string(list[i], field);
    ES_CHECK(tables.contains(name), "{}: field '{}' is {}, which is not in 'tables'", r.source(),
             field, show(list[i]));
    ES_CHECK(seen.insert(name).second, "{}: field '{}' is {}, listed twice", r.source(), field,
             show(list[i]));
    order.push_back(name);
  }
  ES_CHECK(order.size() == tables.size(), "{}: field 'table_order' lists {} of the {} tables",
           r.source(), order.size(), tables.size());
  return order;
}

PlanFile read_plan(const Reader& r, const json& j) {
  ES_CHECK(j.is_object(), "{}: the top level is {}, expected a plan object", r.source(), show(j));
  const json& format = r.member(j, "", "format");
  ES_CHECK(format == kPlanFormat, "{}: field 'format' is {}, expected \"{}\"", r.source(),
           show(format), kPlanFormat);
  const json& version = r.member(j, "", "version");
  ES_CHECK(version == kPlanVersion || version == 1,
           "{}: field 'version' is {}, this reader reads versions 1 and {}", r.source(),
           show(version), kPlanVersion);
  const int file_version = version.get<int>();
  PlanFile p;
  p.path = r.source();
  p.algorithm = r.string_at(j, "", "algorithm");
  p.cost_model = r.string_at(j, "", "cost_model");
  p.batch_size = r.integer_at(j, "", "batch_size", 1, kInt64Max);
  p.num_devices = static_cast<int>(r.integer_at(j, "", "num_devices", 1, kIntMax));
  const json& memory = r.array(r.member(j, "", "device_memory_bytes"), "device_memory_bytes");
  ES_CHECK(memory.size() == static_cast<size_t>(p.num_devices),
           "{}: field 'device_memory_bytes' has {} capacities, expected num_devices = {}",
           r.source(), memory.size(), p.num_devices);
  for (size_t d = 0; d < memory.size(); ++d) {
    p.device_memory_bytes.push_back(
        r.integer(memory[d], index_path("device_memory_bytes", d), 1, kInt64Max));
  }
  const json& tables = r.member(j, "", "tables");
  ES_CHECK(tables.is_object() && !tables.empty(),
           "{}: field 'tables' is {}, expected an object with a field per table", r.source(),
           show(tables));
  int64_t values = 0;
  for (const std::string& name : table_order(r, j, tables)) {
    ES_CHECK(!name.empty(), "{}: field 'tables' has a table with an empty name", r.source());
    p.tables.push_back(read_table(r, name, tables.at(name), p.num_devices, file_version));
    const PlanFileTable& t = p.tables.back();
    const int64_t copies = t.replicated() ? static_cast<int64_t>(t.ranks.size()) : 1;
    ES_CHECK(t.rows * t.dim <= (kMaxPlanValues - values) / copies,
             "{}: field 'tables.{}': the plan holds more than {} values, past what this build "
             "reads",
             r.source(), name, kMaxPlanValues);
    values += t.rows * t.dim * copies;
  }
  if (j.contains("memory_model")) check_memory(r, j["memory_model"], file_version, p);
  if (j.contains("task")) {  // absent: a training plan (written before inference ones)
    const std::vector<std::string>& names = step_kind_names();
    const json& task = j["task"];
    const auto it = task.is_string() ? std::find(names.begin(), names.end(), task) : names.end();
    ES_CHECK(it != names.end(), "{}: field 'task' is {}, expected {}", r.source(), show(task),
             fmt::join(names, " or "));
    p.step = static_cast<StepKind>(it - names.begin());
  }
  if (j.contains("topology")) p.topology = read_topology(r, j["topology"], p.num_devices);
  p.predicted = read_prediction(r, j, p.num_devices);
  for (int d = 0; d < p.num_devices; ++d) {
    ES_CHECK(p.predicted.devices[d].memory_bytes <= p.device_memory_bytes[d],
             "{}: field 'predicted.devices[{}].memory_bytes' is {}, past the device's capacity "
             "device_memory_bytes[{}] = {}",
             r.source(), d, p.predicted.devices[d].memory_bytes, d, p.device_memory_bytes[d]);
  }
  return p;
}

}  // namespace

PlanFile parse_plan_file(const std::string& text, const std::string& source) {
  return read_plan(Reader(source), parse_json_document(text, source + ": not a plan file"));
}

PlanFile load_plan_file(const std::string& path) { return parse_plan_file(read_file(path), path); }

}  // namespace embshard
