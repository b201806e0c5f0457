// Reading `bench compute` / `bench comm` files for training and validation.
//
// Unlike RecordFile (which must resume a run and so stops at a corrupted
// line), the readers here check every record and skip the bad ones with the
// line number and the reason: a model must never be trained on them, and one
// damaged line should not make a long measurement unusable.
#include "embshard/cost/cost_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

using nlohmann::json;

constexpr const char* kComputeFormat = "embshard-compute-costs";
constexpr const char* kCommFormat = "embshard-comm-costs";

struct Lines {
  json header;
  std::vector<std::pair<int64_t, json>> records;  // (line, record)
  std::vector<DataProblem> problems;
};

// Splits a file into its header and parsed records; lines that are not a JSON
// object (a torn last line included) become problems.
Lines read_lines(const std::string& path) {
  const std::string text = read_file(path);
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
    json value = json::parse(body, nullptr, false);
    const bool ok = complete && !value.is_discarded() && value.is_object();
    if (line == 1) {
      ES_CHECK(ok, "{}: line 1 (the header) is not a complete JSON object", path);
      out.header = std::move(value);
    } else if (!ok) {
      out.problems.push_back({line, complete ? "not a JSON object" : "torn (no newline at end)"});
    } else {
      out.records.emplace_back(line, std::move(value));
    }
  }
  ES_CHECK(line >= 1, "{}: empty file (no header line)", path);
  return out;
}

void check_header(const std::string& path, const json& header, const char* format) {
  ES_CHECK(header.value("format", "") == format, "{}: format is '{}', expected '{}'", path,
           header.value("format", ""), format);
  ES_CHECK(header.value("version", 0) == 1, "{}: {} version {}, this embshard reads version 1",
           path, format, header.value("version", 0));
}

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

// Throws json::exception or std::invalid_argument for a malformed record.
ComputeRecord parse_compute(const json& r) {
  ComputeRecord rec;
  const json& ms = r.at("ms");
  if (!ms.is_number() || !positive_finite(ms.get<double>())) {
    throw std::invalid_argument(fmt::format("ms is {}, must be a positive number", ms.dump()));
  }
  rec.ms = ms.get<double>();
  const json& tables = r.at("tables");
  if (!tables.is_array() || tables.empty()) throw std::invalid_argument("no tables");
  for (const json& t : tables) {
    TableFeatures f;
    f.rows = t.at("rows").get<int64_t>();
    f.dim = t.at("dim").get<int>();
    f.pooling_factor = t.at("pooling_factor").get<double>();
    f.row_reuse = t.at("row_reuse_histogram").get<ReuseHistogram>();
    f.lookup_reuse = t.at("lookup_reuse_histogram").get<ReuseHistogram>();
    if (f.rows <= 0 || f.dim <= 0 || !std::isfinite(f.pooling_factor) || f.pooling_factor < 0) {
      throw std::invalid_argument(fmt::format("table with rows {}, dim {}, pooling factor {}",
                                              f.rows, f.dim, f.pooling_factor));
    }
    for (int k = 0; k < kReuseBins; ++k) {
      if (!std::isfinite(f.row_reuse[k]) || !std::isfinite(f.lookup_reuse[k]) ||
          f.row_reuse[k] < 0 || f.lookup_reuse[k] < 0) {
        throw std::invalid_argument(fmt::format("invalid reuse share in bin {}", k));
      }
    }
    rec.tables.push_back(f);
    rec.pool_ids.push_back(t.value("table", -1));
  }
  return rec;
}

CommRecord parse_comm(const json& r, int num_devices) {
  CommRecord rec;
  rec.dim_sums = r.at("dim_sums").get<std::vector<double>>();
  rec.delays_ms = r.at("delays_ms").get<std::vector<double>>();
  rec.fwd_ms = r.at("fwd_ms").get<std::vector<double>>();
  rec.bwd_ms = r.at("bwd_ms").get<std::vector<double>>();
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

// Parses every record with `parse`; the bad ones become problems. Null
// values (JSON's spelling of NaN) fail the type checks and land here too.
template <typename Record, typename Parse>
std::vector<Record> parse_all(const std::string& path, Lines& lines, double max_bad_share,
                              Parse parse) {
  std::vector<Record> out;
  for (auto& [line, value] : lines.records) {
    try {
      Record rec = parse(value);
      rec.line = line;
      out.push_back(std::move(rec));
    } catch (const std::exception& e) {
      lines.problems.push_back({line, e.what()});
    }
  }
  std::sort(lines.problems.begin(), lines.problems.end(),
            [](const DataProblem& a, const DataProblem& b) { return a.line < b.line; });
  const size_t total = out.size() + lines.problems.size();
  ES_CHECK(static_cast<double>(lines.problems.size()) <= max_bad_share * static_cast<double>(total),
           "{}: {} of {} records are bad (first: line {}: {}): refusing to use the file", path,
           lines.problems.size(), total, lines.problems.empty() ? 0 : lines.problems[0].line,
           lines.problems.empty() ? "" : lines.problems[0].reason);
  return out;
}

}  // namespace

CostDataKind detect_cost_data_kind(const std::string& path) {
  const Lines lines = read_lines(path);
  const std::string format = lines.header.value("format", "");
  if (format == kComputeFormat) return CostDataKind::kCompute;
  if (format == kCommFormat) return CostDataKind::kComm;
  ES_THROW("{}: format is '{}', expected '{}' or '{}'", path, format, kComputeFormat, kCommFormat);
}

ComputeData load_compute_data(const std::string& path, double max_bad_share) {
  Lines lines = read_lines(path);
  check_header(path, lines.header, kComputeFormat);
  ComputeData data;
  data.path = path;
  data.header = lines.header;
  data.batch_size = lines.header.value("batch_size", int64_t{0});
  ES_CHECK(data.batch_size > 0, "{}: header batch_size is {}", path, data.batch_size);
  data.records = parse_all<ComputeRecord>(path, lines, max_bad_share, parse_compute);
  data.problems = std::move(lines.problems);
  ES_CHECK(!data.records.empty(), "{}: no valid records", path);
  return data;
}

CommData load_comm_data(const std::string& path, double max_bad_share) {
  Lines lines = read_lines(path);
  check_header(path, lines.header, kCommFormat);
  CommData data;
  data.path = path;
  data.header = lines.header;
  data.batch = lines.header.value("batch", int64_t{0});
  data.num_devices = lines.header.value("num_devices", 0);
  ES_CHECK(data.batch > 0 && data.num_devices > 0, "{}: header batch {} / num_devices {} invalid",
           path, data.batch, data.num_devices);
  const int n = data.num_devices;
  data.records = parse_all<CommRecord>(path, lines, max_bad_share,
                                       [n](const json& r) { return parse_comm(r, n); });
  data.problems = std::move(lines.problems);
  ES_CHECK(!data.records.empty(), "{}: no valid records", path);
  return data;
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
