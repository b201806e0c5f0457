// A neural model against measured data, through the production (torch-free)
// inference path.
#include "embshard/cost/neural/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "embshard/cost/anchors.h"
#include "embshard/cost/floor.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/error.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

using nlohmann::json;

// "cuda (NVIDIA H100 80GB HBM3) on Intel(R) Xeon(R) Processor": where a
// compute file (its header, or a model's data entry) was measured; "" when
// it does not say.
std::string measured_on(const json& header) {
  // contains() is false where a key on the way is not an object.
  const json::json_pointer executor("/executor"), cpu("/machine/cpu");
  if (!header.contains(executor) || !header.contains(cpu) || !header.at(executor).is_string() ||
      !header.at(cpu).is_string()) {
    return "";
  }
  return header.at(executor).get<std::string>() + " on " + header.at(cpu).get<std::string>();
}

// A model that learned normalized costs judged on version 1 records (raw
// medians) would compare two scales: refused unless judged on raw medians.
void check_normalized(const std::string& path, bool normalized, bool raw) {
  ES_CHECK(raw || normalized,
           "{}: version 1 records (raw medians, measured before the drift-cancelling "
           "reference probe): the model learned normalized costs. Measure the file again with "
           "this embshard (bench compute / bench comm), or judge on raw medians with --raw",
           path);
}

json floors_json(const FloorFigures& f) {
  const auto records = [](const std::vector<FloorRecord>& list) {
    json out = json::array();
    for (const FloorRecord& r : list) {
      out.push_back({{"line", r.line},
                     {"tables", r.tables},
                     {"floor_ms", r.floor_ms},
                     {"measured_ms", r.measured_ms},
                     {"predicted_ms", r.predicted_ms}});
    }
    return out;
  };
  const auto spread = [](std::vector<double> x) {
    if (x.empty()) return json();
    std::sort(x.begin(), x.end());
    return json{{"min", x.front()}, {"median", x[x.size() / 2]}, {"max", x.back()}};
  };
  return {{"memory_gbps", f.memory_gbps},
          {"memory_source", f.memory_source},
          {"measured_over_floor", spread(f.measured_over)},
          {"predicted_over_floor", spread(f.predicted_over)},
          {"measured_under", f.measured_under},
          {"measured_far_over", f.measured_far_over},
          {"predicted_under", f.under_count},
          {"predicted_far_over", f.far_over_count},
          {"under", records(f.under)},
          {"far_over", records(f.far_over)}};
}

// The kMissedRecords of `records` farthest from their floors, farthest first.
void keep_farthest(std::vector<FloorRecord>& records) {
  const auto far = [](const FloorRecord& r) {
    const double x = r.predicted_ms / r.floor_ms;
    return std::max(x, 1 / x);
  };
  const size_t keep = std::min(kMissedRecords, records.size());
  std::partial_sort(records.begin(), records.begin() + keep, records.end(),
                    [&](const FloorRecord& a, const FloorRecord& b) { return far(a) > far(b); });
  records.resize(keep);
}

// Every record's measurement and prediction against its floor.
std::optional<FloorFigures> floor_figures(const NeuralModel& model, const ComputeData& data,
                                          const Comparison& c) {
  if (model.copy_gbps <= 0) return std::nullopt;
  FloorFigures f;
  f.memory_gbps = model.copy_gbps;
  f.memory_source = model.copy_source;
  // Row-wise Adagrad keeps one fp32 per row; SGD none.
  const int64_t state = data.header.value("optimizer", std::string()) == "sgd" ? 0 : 4;
  for (size_t i = 0; i < data.records.size(); ++i) {
    const ComputeRecord& r = data.records[i];
    double bytes = 0;
    for (const TableFeatures& t : r.tables)
      bytes += fused_work_bytes(t, r.batch, DataType::kFp32, state).total();
    const FloorRecord fr{r.line, r.tables.size(), floor_ms(bytes, f.memory_gbps), c.measured[i],
                         c.predicted[i]};
    if (fr.floor_ms <= 0) continue;
    f.measured_over.push_back(fr.measured_ms / fr.floor_ms);
    f.predicted_over.push_back(fr.predicted_ms / fr.floor_ms);
    f.measured_under += check_floor(fr.measured_ms, fr.floor_ms) == FloorCheck::kUnder;
    f.measured_far_over += check_floor(fr.measured_ms, fr.floor_ms) == FloorCheck::kFarOver;
    switch (check_floor(fr.predicted_ms, fr.floor_ms)) {
      case FloorCheck::kUnder:
        f.under.push_back(fr);
        break;
      case FloorCheck::kFarOver:
        f.far_over.push_back(fr);
        break;
      case FloorCheck::kWithin:
        break;
    }
  }
  f.under_count = f.under.size();
  f.far_over_count = f.far_over.size();
  keep_farthest(f.under);
  keep_farthest(f.far_over);
  return f;
}

FileValidation validate_compute(const NeuralModel& model, const std::string& path,
                                Reporter& reporter, bool raw) {
  LoadOptions lo;
  lo.raw = raw;
  const ComputeData data = load_compute_data(path, lo);
  check_normalized(path, data.normalized, raw);
  report_problems(path, data.problems, reporter);
  const json* files = measured_compute_files(model);
  const std::string trained = files == nullptr ? "" : measured_on(files->front());
  const std::string measured = measured_on(data.header);
  if (!trained.empty() && !measured.empty() && trained != measured) {
    reporter.note(fmt::format("validate: the model learned from measurements on '{}', {} was "
                              "measured on '{}': the figures compare two machines",
                              trained, path, measured));
  }
  FileValidation v;
  v.kind = CostDataKind::kCompute;
  v.skipped_bad_records = data.problems.size();
  v.scale = check_file_scale(data.header, path, files);
  std::vector<int> all(data.records.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  v.comparisons.push_back(compute_comparison(model, data, all, "compute", "compute: " + path));
  const Comparison& c = v.comparisons.front();
  for (size_t i = 0; i < all.size(); ++i) {
    v.most_missed.push_back({data.records[i].line, data.records[i].tables.size(), c.measured[i],
                             c.predicted[i], 100 * std::abs(c.predicted[i] / c.measured[i] - 1)});
  }
  const size_t keep = std::min(kMissedRecords, v.most_missed.size());
  std::partial_sort(v.most_missed.begin(), v.most_missed.begin() + keep, v.most_missed.end(),
                    [](const MissedRecord& a, const MissedRecord& b) {
                      return a.ape_pct != b.ape_pct ? a.ape_pct > b.ape_pct : a.line < b.line;
                    });
  v.most_missed.resize(keep);
  v.breakdown = breakdown_comparisons(data, all, c);
  v.floors = floor_figures(model, data, c);
  return v;
}

FileValidation validate_comm(const NeuralModel& model, const std::string& path, Reporter& reporter,
                             bool raw, const Topology& hosts) {
  ES_CHECK(model.has_comm,
           "{}: a comm file, but the model has no communication networks (it was trained "
           "without --comm)",
           path);
  std::vector<CommData> files;
  LoadOptions lo;
  lo.raw = raw;
  files.push_back(load_comm_data(path, lo));
  const CommData& data = files.front();
  check_normalized(path, data.normalized, raw);
  report_problems(path, data.problems, reporter);
  FileValidation v;
  v.kind = CostDataKind::kComm;
  v.skipped_bad_records = data.problems.size();
  std::vector<std::pair<int, int>> items;
  for (size_t r = 0; r < data.records.size(); ++r) items.emplace_back(0, static_cast<int>(r));
  check_topology(hosts, data.num_devices);
  comm_comparisons(
      model, files, items, "",
      fmt::format(", {} devices{}", data.num_devices,
                  hosts.hierarchical(data.num_devices) ? " on " + hosts.str(data.num_devices) : ""),
      v.comparisons, hosts, true);
  return v;
}

}  // namespace

Comparison compute_comparison(const NeuralModel& model, const ComputeData& data,
                              const std::vector<int>& records, std::string name,
                              std::string title) {
  Comparison c{std::move(name), std::move(title), {}, {}};
  for (int i : records) {
    c.predicted.push_back(predict_compute_ms(model, data.records[i].tables, data.records[i].batch));
    c.measured.push_back(data.records[i].ms);
  }
  return c;
}

namespace {

std::vector<Comparison> piece_comparisons(const ComputeData& data, const std::vector<int>& records,
                                          const Comparison& all) {
  Comparison whole{all.name + "_whole_tables", "- of which, whole tables only", {}, {}, false};
  Comparison rows{all.name + "_row_blocks", "- of which, with row blocks", {}, {}, false};
  Comparison slices{all.name + "_replica_slices", "- of which, with replica slices", {}, {},
                    false};
  for (size_t k = 0; k < records.size(); ++k) {
    const ComputeRecord& record = data.records[records[k]];
    const bool row = has_row_blocks(record), slice = has_replica_slices(record);
    for (Comparison* c : {row ? &rows : nullptr, slice ? &slices : nullptr,
                          row || slice ? nullptr : &whole}) {
      if (c == nullptr) continue;
      c->predicted.push_back(all.predicted[k]);
      c->measured.push_back(all.measured[k]);
    }
  }
  std::vector<Comparison> out;
  if (whole.measured.size() == records.size()) return out;
  for (Comparison* c : {&whole, &rows, &slices}) {
    if (!c->measured.empty()) out.push_back(std::move(*c));
  }
  return out;
}

std::vector<Comparison> type_comparisons(const ComputeData& data, const std::vector<int>& records,
                                         const Comparison& all) {
  std::vector<Comparison> by_type;
  by_type.push_back({all.name + "_fp32_only", "- of which, fp32 tables only", {}, {}, false});
  for (DataType type : {DataType::kFp16, DataType::kBf16}) {
    const std::string& name = data_type_name(type);
    by_type.push_back(
        {all.name + "_with_" + name, "- of which, with " + name + " tables", {}, {}, false});
  }
  for (size_t k = 0; k < records.size(); ++k) {
    bool typed = false;
    for (DataType type : {DataType::kFp16, DataType::kBf16}) {
      const auto& tables = data.records[records[k]].tables;
      if (std::ranges::none_of(tables,
                               [&](const TableFeatures& t) { return t.data_type == type; })) {
        continue;
      }
      typed = true;
      Comparison& c = by_type[static_cast<size_t>(type)];
      c.predicted.push_back(all.predicted[k]);
      c.measured.push_back(all.measured[k]);
    }
    if (!typed) {
      by_type[0].predicted.push_back(all.predicted[k]);
      by_type[0].measured.push_back(all.measured[k]);
    }
  }
  std::vector<Comparison> out;
  if (by_type[0].measured.size() == records.size()) return out;
  for (Comparison& c : by_type) {
    if (!c.measured.empty()) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::vector<Comparison> breakdown_comparisons(const ComputeData& data,
                                              const std::vector<int>& records,
                                              const Comparison& all) {
  std::vector<Comparison> out = piece_comparisons(data, records, all);
  for (Comparison& c : type_comparisons(data, records, all)) out.push_back(std::move(c));
  return out;
}

void comm_comparisons(const NeuralModel& model, const std::vector<CommData>& files,
                      const std::vector<std::pair<int, int>>& items, const std::string& suffix,
                      const std::string& title_suffix, std::vector<Comparison>& out,
                      const Topology& hosts, bool slowest) {
  Comparison fwd{"comm_fwd" + suffix, "comm forward" + title_suffix, {}, {}};
  Comparison bwd{"comm_bwd" + suffix, "comm backward" + title_suffix, {}, {}};
  Comparison fwd_max{"comm_fwd_slowest" + suffix, "- slowest device's", {}, {}, false};
  Comparison bwd_max{"comm_bwd_slowest" + suffix, "- slowest device's", {}, {}, false};
  const auto max_of = [](const std::vector<double>& v) { return *std::ranges::max_element(v); };
  for (const auto& [f, r] : items) {
    const CommRecord& rec = files[f].records[r];
    std::vector<double> pf(rec.dim_sums.size()), pb(rec.dim_sums.size());
    predict_comm_ms(model, rec.dim_sums, rec.delays_ms, pf, pb, files[f].batch_size);
    add_host_level(hosts, files[f].batch_size, rec.dim_sums, rec.delays_ms, pf, pb);
    fwd.predicted.insert(fwd.predicted.end(), pf.begin(), pf.end());
    fwd.measured.insert(fwd.measured.end(), rec.fwd_ms.begin(), rec.fwd_ms.end());
    bwd.predicted.insert(bwd.predicted.end(), pb.begin(), pb.end());
    bwd.measured.insert(bwd.measured.end(), rec.bwd_ms.begin(), rec.bwd_ms.end());
    if (!slowest || pf.empty()) continue;
    fwd_max.predicted.push_back(max_of(pf));
    fwd_max.measured.push_back(max_of(rec.fwd_ms));
    bwd_max.predicted.push_back(max_of(pb));
    bwd_max.measured.push_back(max_of(rec.bwd_ms));
  }
  out.push_back(std::move(fwd));
  if (slowest) out.push_back(std::move(fwd_max));
  out.push_back(std::move(bwd));
  if (slowest) out.push_back(std::move(bwd_max));
}

FileValidation validate_on_file(const NeuralModel& model, const std::string& model_dir,
                                const std::string& path, Reporter& reporter, bool raw,
                                const Topology& hosts) {
  const CostDataKind kind = detect_cost_data_kind(path);
  ES_CHECK(kind == CostDataKind::kComm || hosts.devices_per_host == 0,
           "{}: a compute file; --devices-per-host is for bench comm files", path);
  FileValidation v = kind == CostDataKind::kCompute
                         ? validate_compute(model, path, reporter, raw)
                         : validate_comm(model, path, reporter, raw, hosts);
  // Top level: compute's figures, or for comm both directions pooled (every
  // device's fwd and bwd ms); per direction under "fwd" / "bwd", and each
  // placement's slowest device under "fwd_slowest" / "bwd_slowest".
  std::vector<double> predicted, measured;
  for (const Comparison& c : v.comparisons) {
    if (!c.plot) continue;  // the slowest devices: those records again
    predicted.insert(predicted.end(), c.predicted.begin(), c.predicted.end());
    measured.insert(measured.end(), c.measured.begin(), c.measured.end());
  }
  v.figures = to_json(accuracy(predicted, measured));
  v.figures["kind"] = kind == CostDataKind::kCompute ? "compute" : "comm";
  v.figures["model"] = model_dir;
  v.figures["data"] = path;
  v.figures["skipped_bad_records"] = v.skipped_bad_records;
  if (v.scale) {
    v.figures["scale"] = {{"method", v.scale->method},
                          {"file_ms", v.scale->file_ms},
                          {"model_ms", v.scale->model_ms},
                          {"model_spread", v.scale->model_spread},
                          {"moved_past_spread", v.scale->moved_past_spread}};
  }
  if (kind == CostDataKind::kCompute) {
    json& missed = v.figures["most_missed"] = json::array();
    for (const MissedRecord& m : v.most_missed) {
      missed.push_back({{"line", m.line},
                        {"tables", m.tables},
                        {"measured_ms", m.measured_ms},
                        {"predicted_ms", m.predicted_ms},
                        {"ape_pct", m.ape_pct}});
    }
  }
  if (v.floors) v.figures["floors"] = floors_json(*v.floors);
  for (const Comparison& c : v.breakdown) {  // "compute_row_blocks" -> "row_blocks"
    const std::string key = c.name.substr(v.comparisons.front().name.size() + 1);
    v.figures["breakdown"][key] = to_json(accuracy(c.predicted, c.measured));
  }
  for (const Comparison& c : v.comparisons) {  // "comm_fwd_slowest" -> "fwd_slowest"
    if (kind == CostDataKind::kComm) {
      v.figures[c.name.substr(5)] = to_json(accuracy(c.predicted, c.measured));
    }
  }
  return v;
}

}  // namespace embshard
