// Reading `bench compute` / `bench comm` files for training and validation.
//
// Unlike RecordFile (which must resume a run and so stops at a corrupted
// line), the readers here check every record and skip the bad ones with the
// line number and the reason: a model must never be trained on them, and one
// damaged line should not make a long measurement unusable.
#include "embshard/cost/cost_data.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/record_file.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

using nlohmann::json;

struct Lines {
  json header;
  std::vector<std::pair<int64_t, json>> records;  // (line, record)
  std::vector<DataProblem> problems;
};

// Splits a file into its header and parsed records; lines that are not a JSON
// object (a torn last line included) become problems.
Lines read_lines(const std::string& path) {
  const std::string text = read_file_gunzip(path);
  Lines out;
  size_t begin = 0;
  int64_t line = 0;
  while (begin < text.size()) {
    ++line;
    size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    const std::string body = text.substr(begin, end - begin);
    begin = end + 1;
    if (body.empty() && complete) continue;
    // A line nested past any record's depth is not a record (json_field.h).
    const bool too_deep = json_nests_deeper_than(body, kMaxJsonDepth);
    json value = too_deep ? json(json::value_t::discarded) : json::parse(body, nullptr, false);
    const bool ok = complete && !value.is_discarded() && value.is_object();
    if (line == 1) {
      if (!ok && complete) check_not_a_json_document(path, text, "measurements");
      ES_CHECK(ok, "{}: line 1 (the header) is not a complete JSON object", path);
      out.header = std::move(value);
    } else if (!ok) {
      out.problems.push_back({line, !complete ? "torn (no newline at end)"
                                    : too_deep ? "nested deeper than any record"
                                               : "not a JSON object"});
    } else {
      out.records.emplace_back(line, std::move(value));
    }
  }
  // An empty first line is skipped above: the header is then missing, not line 2.
  ES_CHECK(out.header.is_object(), "{}: no header line (an empty file, or line 1 is empty)", path);
  return out;
}

// Returns whether the file holds normalized ground truth (version 2).
bool check_header(const std::string& path, const json& header, const char* format) {
  const std::string writer = format == std::string(kComputeFormat) ? "bench compute"
                             : format == std::string(kCommFormat)  ? "bench comm"
                                                                   : "bench comm --collectives";
  // value(key, json()): a field of another type is this error, not a type error.
  const json found = header.value("format", json()), version = header.value("version", json());
  ES_CHECK(found == format, "{}: format is {}, expected '{}' (a file of `embshard {}`)", path,
           found.dump(), format, writer);
  ES_CHECK(version == 1 || version == kCostDataVersion,
           "{}: {} version {}, this embshard reads versions 1 (raw) and {} (normalized)", path,
           format, version.dump(), kCostDataVersion);
  return version == kCostDataVersion;
}

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

// Throws Error or std::invalid_argument for a malformed record.
ComputeRecord parse_compute(const json& r) {
  ComputeRecord rec;
  rec.ms = json_field(r, "/ms", JsonKind::kNumber).get<double>();
  if (!positive_finite(rec.ms)) {
    throw std::invalid_argument(fmt::format("ms is {}, must be a positive number", rec.ms));
  }
  const json* raw_ms = json_optional(r, "/raw_ms", JsonKind::kNumber);
  rec.raw_ms = raw_ms ? raw_ms->get<double>() : rec.ms;
  if (!positive_finite(rec.raw_ms)) {
    throw std::invalid_argument(fmt::format("raw_ms is {}, must be a positive number", rec.raw_ms));
  }
  const json& tables = json_field(r, "/tables", JsonKind::kArray);
  if (tables.empty()) throw std::invalid_argument("no tables");
  for (size_t i = 0; i < tables.size(); ++i) {
    const json& t = tables[i];
    // The whole path is formatted only for the error: files hold 1e5 records.
    const auto field = [&](const char* key, JsonKind kind) -> const json& {
      const auto it = t.find(key);
      if (it != t.end() && json_is(*it, kind)) return *it;
      return json_field(r, fmt::format("/tables/{}/{}", i, key), kind);
    };
    const auto histogram = [&](const char* key) {
      const json& v = field(key, JsonKind::kNumbers);
      if (v.size() != kReuseBins) {
        throw std::invalid_argument(fmt::format(
            "field '/tables/{}/{}' holds {} shares, expected {}", i, key, v.size(), kReuseBins));
      }
      return v.get<ReuseHistogram>();
    };
    TableFeatures f;
    f.rows = field("rows", JsonKind::kInteger).get<int64_t>();
    const int64_t dim = field("dim", JsonKind::kInteger).get<int64_t>();
    f.pooling_factor = field("pooling_factor", JsonKind::kNumber).get<double>();
    // Dims as the kernels take them (1..1024), checked before narrowing.
    if (f.rows <= 0 || dim <= 0 || dim > 1024 || !std::isfinite(f.pooling_factor) ||
        f.pooling_factor < 0) {
      throw std::invalid_argument(fmt::format("/tables/{}: rows {}, dim {}, pooling factor {}", i,
                                              f.rows, dim, f.pooling_factor));
    }
    f.dim = static_cast<int>(dim);
    f.row_reuse = histogram("row_reuse_histogram");
    f.lookup_reuse = histogram("lookup_reuse_histogram");
    for (int k = 0; k < kReuseBins; ++k) {
      if (!std::isfinite(f.row_reuse[k]) || !std::isfinite(f.lookup_reuse[k]) ||
          f.row_reuse[k] < 0 || f.lookup_reuse[k] < 0) {
        throw std::invalid_argument(fmt::format("/tables/{}: invalid reuse share in bin {}", i, k));
      }
    }
    if (const auto it = t.find("data_type"); it != t.end()) {  // absent: fp32
      const std::vector<std::string>& names = data_type_names();
      const auto name = it->is_string() ? std::find(names.begin(), names.end(), *it) : names.end();
      if (name == names.end()) {
        throw std::invalid_argument(fmt::format("field '/tables/{}/data_type' is {}, expected {}",
                                                i, it->dump(), fmt::join(names, ", ")));
      }
      f.data_type = static_cast<DataType>(name - names.begin());
    }
    // A piece (bench compute --pieces): a row block starts at row_offset, a
    // replica serves slice s of n of the batch.
    if (const auto it = t.find("row_offset"); it != t.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0) {
        throw std::invalid_argument(
            fmt::format("row_offset is {}, not a non-negative integer", it->dump()));
      }
      f.row_piece = true;
      f.source_row_offset = it->get<int64_t>();
    }
    if (const auto it = t.find("batch_slice"); it != t.end()) {
      const json& s = *it;
      if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() ||
          !s[1].is_number_integer() || s[1].get<int64_t>() < 2 || s[0].get<int64_t>() < 0 ||
          s[0].get<int64_t>() >= s[1].get<int64_t>() || s[1].get<int64_t>() > 1 << 20) {
        throw std::invalid_argument(fmt::format(
            "batch_slice is {}, not [slice, slices] with 0 <= slice < slices, slices >= 2",
            s.dump()));
      }
      f.batch_slice = s[0].get<int>();
      f.batch_slices = s[1].get<int>();
    }
    rec.tables.push_back(f);
    rec.pool_ids.push_back(t.contains("table") ? field("table", JsonKind::kInteger).get<int>()
                                               : -1);
  }
  return rec;
}

CommRecord parse_comm(const json& r, int num_devices, bool raw) {
  CommRecord rec;
  const auto numbers = [&r](const char* field) {
    return json_field(r, field, JsonKind::kNumbers).get<std::vector<double>>();
  };
  rec.dim_sums = numbers("/dim_sums");
  rec.delays_ms = numbers("/delays_ms");
  const bool has_raw = raw && r.contains("raw_fwd_ms");
  rec.fwd_ms = numbers(has_raw ? "/raw_fwd_ms" : "/fwd_ms");
  rec.bwd_ms = numbers(has_raw ? "/raw_bwd_ms" : "/bwd_ms");
  const size_t n = static_cast<size_t>(num_devices);
  if (rec.dim_sums.size() != n || rec.delays_ms.size() != n || rec.fwd_ms.size() != n ||
      rec.bwd_ms.size() != n) {
    throw std::invalid_argument(fmt::format("arrays are not of length num_devices = {}", n));
  }
  for (size_t d = 0; d < n; ++d) {
    if (!positive_finite(rec.fwd_ms[d]) || !positive_finite(rec.bwd_ms[d])) {
      throw std::invalid_argument(fmt::format("device {}: fwd_ms {} / bwd_ms {} must be positive",
                                              d, rec.fwd_ms[d], rec.bwd_ms[d]));
    }
    if (!std::isfinite(rec.dim_sums[d]) || rec.dim_sums[d] < 0 ||
        !std::isfinite(rec.delays_ms[d]) || rec.delays_ms[d] < 0) {
      throw std::invalid_argument(fmt::format("device {}: dim sum {} / delay {} invalid", d,
                                              rec.dim_sums[d], rec.delays_ms[d]));
    }
  }
  return rec;
}

CollectiveRecord parse_collective(const json& r, int num_devices) {
  const auto numbers = [&r](const char* field) {
    return json_field(r, field, JsonKind::kNumbers).get<std::vector<double>>();
  };
  CollectiveRecord rec;
  rec.load.rw_dim_sums = numbers("/rw_dim_sums");
  rec.load.index_recv_bytes = numbers("/index_recv_bytes");
  rec.load.index_send_bytes = numbers("/index_send_bytes");
  rec.fwd_ms = numbers("/fwd_ms");
  rec.bwd_ms = numbers("/bwd_ms");
  const json& allreduce = json_field(r, "/allreduce_bytes", JsonKind::kNumber);
  rec.load.allreduce_bytes = allreduce.get<double>();
  const size_t n = static_cast<size_t>(num_devices);
  for (const auto* v : {&rec.load.rw_dim_sums, &rec.load.index_recv_bytes,
                        &rec.load.index_send_bytes, &rec.fwd_ms, &rec.bwd_ms}) {
    if (v->size() != n) {
      throw std::invalid_argument(fmt::format("arrays are not of length num_devices = {}", n));
    }
    for (double x : *v) {
      if (!std::isfinite(x) || x < 0) {
        throw std::invalid_argument(fmt::format("{} is not a non-negative number", x));
      }
    }
  }
  if (!std::isfinite(rec.load.allreduce_bytes) || rec.load.allreduce_bytes < 0) {
    throw std::invalid_argument(
        fmt::format("allreduce_bytes {} is not a non-negative number", rec.load.allreduce_bytes));
  }
  return rec;
}

// Parses every record with `parse`; the bad ones become problems. Null
// values (JSON's spelling of NaN) fail the type checks and land here too.
template <typename Record, typename Parse>
std::vector<Record> parse_all(const std::string& path, Lines& lines, const LoadOptions& options,
                              Parse parse) {
  std::vector<Record> out;
  for (auto& [line, value] : lines.records) {
    try {
      Record rec = parse(value);
      rec.line = line;
      out.push_back(std::move(rec));
    } catch (const json::exception& e) {
      // "[json.exception.out_of_range.403] key 'tables' not found": the words only.
      const std::string what = e.what();
      const size_t tag = what.rfind("[json.exception", 0) == 0 ? what.find("] ") : std::string::npos;
      lines.problems.push_back(
          {line, "malformed record: " + (tag == std::string::npos ? what : what.substr(tag + 2))});
    } catch (const std::exception& e) {
      lines.problems.push_back({line, e.what()});
    }
  }
  std::sort(lines.problems.begin(), lines.problems.end(),
            [](const DataProblem& a, const DataProblem& b) { return a.line < b.line; });
  if (options.check == RecordCheck::kStrict && !lines.problems.empty()) {
    ES_THROW("{}: line {}: {}", path, lines.problems[0].line, lines.problems[0].reason);
  }
  const size_t total = out.size() + lines.problems.size();
  ES_CHECK(static_cast<double>(lines.problems.size()) <=
               options.max_bad_share * static_cast<double>(total),
           "{}: {} of {} records are bad (first: line {}: {}): refusing to use the file", path,
           lines.problems.size(), total, lines.problems.empty() ? 0 : lines.problems[0].line,
           lines.problems.empty() ? "" : lines.problems[0].reason);
  return out;
}

}  // namespace

CostDataKind detect_cost_data_kind(const std::string& path) {
  const Lines lines = read_lines(path);
  const json format = lines.header.value("format", json());
  if (format == kComputeFormat) return CostDataKind::kCompute;
  if (format == kCommFormat) return CostDataKind::kComm;
  ES_THROW("{}: format is {}, expected '{}' or '{}'", path, format.dump(), kComputeFormat,
           kCommFormat);
}

// A header's positive integer field, named with its value when it is not one.
int64_t header_count(const std::string& path, const json& header, const std::string& key,
                     int64_t max = int64_t{1} << 40) {
  const auto it = header.find(key);
  ES_CHECK(it != header.end(), "{}: the header has no field '{}'", path, key);
  ES_CHECK(it->is_number_integer() && it->get<int64_t>() > 0 && it->get<int64_t>() <= max,
           "{}: header field '{}' is {}, expected an integer in 1..{}", path, key,
           json_shown(*it), max);
  return it->get<int64_t>();
}

ComputeData load_compute_data(const std::string& path, const LoadOptions& options) {
  Lines lines = read_lines(path);
  ComputeData data;
  data.normalized = check_header(path, lines.header, kComputeFormat);
  data.path = path;
  data.header = lines.header;
  data.batch_size = header_count(path, lines.header, "batch_size");
  data.max_batch_size = data.batch_size;
  data.records = parse_all<ComputeRecord>(path, lines, options, parse_compute);
  for (ComputeRecord& r : data.records) {
    r.batch = data.batch_size;
    if (options.raw) r.ms = r.raw_ms;
  }
  if (options.raw) data.normalized = false;
  data.problems = std::move(lines.problems);
  ES_CHECK(!data.records.empty(), "{}: no valid records", path);
  return data;
}

CommData load_comm_data(const std::string& path, const LoadOptions& options) {
  Lines lines = read_lines(path);
  CommData data;
  data.normalized = check_header(path, lines.header, kCommFormat);
  data.path = path;
  data.header = lines.header;
  // Version 1 spelled it "batch".
  data.batch_size = header_count(path, lines.header, data.normalized ? "batch_size" : "batch");
  data.num_devices = static_cast<int>(header_count(path, lines.header, "num_devices", 1 << 16));
  const int n = data.num_devices;
  data.records = parse_all<CommRecord>(path, lines, options,
                                       [n, &options](const json& r) {
                                         return parse_comm(r, n, options.raw);
                                       });
  if (options.raw) data.normalized = false;
  data.problems = std::move(lines.problems);
  ES_CHECK(!data.records.empty(), "{}: no valid records", path);
  return data;
}

CollectiveData load_collective_data(const std::string& path, const LoadOptions& options) {
  Lines lines = read_lines(path);
  CollectiveData data;
  check_header(path, lines.header, kCollectiveFormat);
  data.path = path;
  data.batch_size = header_count(path, lines.header, "batch_size");
  data.num_devices = static_cast<int>(header_count(path, lines.header, "num_devices", 1 << 16));
  const int n = data.num_devices;
  data.records = parse_all<CollectiveRecord>(
      path, lines, options, [n](const json& r) { return parse_collective(r, n); });
  data.problems = std::move(lines.problems);
  ES_CHECK(!data.records.empty(), "{}: no valid records", path);
  return data;
}

bool has_row_blocks(const ComputeRecord& record) {
  return std::ranges::any_of(record.tables, &TableFeatures::row_piece);
}

bool has_replica_slices(const ComputeRecord& record) {
  return std::ranges::any_of(record.tables,
                             [](const TableFeatures& t) { return t.batch_slices > 1; });
}

ComputeData merge_compute_data(std::vector<ComputeData> files) {
  ES_CHECK(!files.empty(), "merge_compute_data: no files");
  if (files.size() == 1) return std::move(files.front());
  ComputeData out;
  out.header = files.front().header;
  out.normalized = files.front().normalized;
  out.batch_size = files.front().batch_size;
  out.max_batch_size = files.front().max_batch_size;
  for (size_t f = 0; f < files.size(); ++f) {
    ComputeData& d = files[f];
    ES_CHECK(d.normalized == out.normalized,
             "{} holds {} ground truth but {} holds {}: one set of files must not mix them",
             d.path, ground_truth_label(d.normalized), files.front().path,
             ground_truth_label(out.normalized));
    out.path += (f ? "," : "") + d.path;
    out.batch_size = std::min(out.batch_size, d.batch_size);
    out.max_batch_size = std::max(out.max_batch_size, d.max_batch_size);
    for (ComputeRecord& r : d.records) {
      r.file = static_cast<int>(f);
      out.records.push_back(std::move(r));
    }
    for (const DataProblem& p : d.problems) {
      out.problems.push_back({p.line, fmt::format("{}: {}", d.path, p.reason)});
    }
  }
  return out;
}

std::string ground_truth_label(bool normalized) {
  return normalized ? "normalized against the reference probe (version 2)" : "raw medians";
}

void report_problems(const std::string& path, const std::vector<DataProblem>& problems,
                     Reporter& reporter) {
  if (problems.empty()) return;
  std::string text = fmt::format("{}: skipped {} bad record(s):", path, problems.size());
  const size_t shown = std::min<size_t>(problems.size(), 10);
  for (size_t i = 0; i < shown; ++i) {
    text += fmt::format("\n  line {}: {}", problems[i].line, problems[i].reason);
  }
  if (shown < problems.size()) text += fmt::format("\n  ... and {} more", problems.size() - shown);
  reporter.note(text);
}

}  // namespace embshard
