// Plan JSON and the terminal report.
#include "embshard/plan/report.h"

#include <algorithm>
#include <numeric>
#include <map>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/util/statistics.h"
#include "embshard/util/text_table.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

// One rank per device on one host: rank N uses cuda:N.
std::string placement(int device) { return fmt::format("rank:{}/cuda:{}", device, device); }

nlohmann::json table_json(const PlanTask& task, const Plan& plan, int t,
                          const std::vector<const Shard*>& shards, int64_t memory_bytes) {
  const std::string type = sharding_type(task, plan, t);
  nlohmann::json j;
  j["sharding_type"] = type;
  // TorchRec's EmbeddingComputeKernel values: "dense" for data parallel.
  j["compute_kernel"] = type == "data_parallel" ? "dense" : "fused";
  std::vector<int> ranks;
  nlohmann::json list = nlohmann::json::array();
  for (const Shard* s : shards) {
    ranks.push_back(s->device);
    list.push_back({{"shard_offsets", {s->row_offset, s->col_offset}},
                    {"shard_sizes", {s->rows, s->cols}},
                    {"placement", placement(s->device)}});
  }
  j["ranks"] = ranks;
  j["shards"] = type == "data_parallel" ? nlohmann::json(nullptr) : list;
  j["rows"] = task.tables[t].rows;
  j["dim"] = task.tables[t].dim;
  j["data_type"] = data_type_name(task.tables[t].data_type);
  j["memory_bytes"] = memory_bytes;
  return j;
}

nlohmann::json imbalance_json(const Imbalance& m) {
  return {{"max_over_mean", m.max_over_mean},
          {"max_over_min", std::isfinite(m.max_over_min) ? nlohmann::json(m.max_over_min) : nlohmann::json(nullptr)},
          {"total_variation", m.total_variation},
          {"kl_divergence", m.kl_divergence}};
}

std::vector<double> totals(const PlanPrediction& p) {
  std::vector<double> v;
  for (const DeviceCosts& c : p.devices) v.push_back(c.total_ms());
  return v;
}

std::vector<double> memories(const PlanPrediction& p) {
  std::vector<double> v;
  for (const DeviceCosts& c : p.devices) v.push_back(static_cast<double>(c.memory_bytes));
  return v;
}

std::string imbalance_lines(const PlanPrediction& p) {
  const Imbalance t = imbalance_of(totals(p)), m = imbalance_of(memories(p));
  const auto line = [](const char* what, const Imbalance& x) {
    return fmt::format("{} imbalance: max/mean {:.3f}, max/min {:.3f}, total variation {:.4f}, "
                       "KL divergence {:.4f}\n",
                       what, x.max_over_mean, x.max_over_min, x.total_variation, x.kl_divergence);
  };
  return line("time", t) + line("memory", m);
}

// A prediction's figures: its cost, the critical device, the imbalance and
// every device's costs.
nlohmann::json prediction_json(const PlanTask& task, const PlanPrediction& p) {
  nlohmann::json devices = nlohmann::json::array();
  for (int d = 0; d < task.num_devices(); ++d) {
    const DeviceCosts& c = p.devices[d];
    devices.push_back(
        {{"memory_bytes", c.memory_bytes},
         {"memory_fraction", static_cast<double>(c.memory_bytes) / task.device_mem_bytes[d]},
         {"compute_ms", c.compute_ms},
         {"fwd_comm_ms", c.fwd_comm_ms},
         {"bwd_comm_ms", c.bwd_comm_ms},
         {"total_ms", c.total_ms()},
         {"num_shards", c.num_shards},
         {"dim_sum", c.dim_sum},
         {"input_bytes", c.input_bytes},
         {"output_bytes", c.output_bytes},
         {"compute_floor_ms", c.compute_floor_ms},
         {"comm_floor_ms", c.comm_floor_ms}});
  }
  return {{"cost_ms", p.cost_ms},
          {"critical_device", p.critical_device},
          {"imbalance", p.imbalance},
          {"imbalance_ms", imbalance_json(imbalance_of(totals(p)))},
          {"imbalance_memory", imbalance_json(imbalance_of(memories(p)))},
          {"devices", devices}};
}

nlohmann::json explanation_json(const PlanTask& task, const std::vector<Decision>& explanation) {
  nlohmann::json why = nlohmann::json::array();
  for (const Decision& d : explanation) {
    const bool alone = d.alternative.empty();
    why.push_back({{"table", task.tables[d.table].name},
                   {"decision", d.decision},
                   {"cost_ms", d.cost_ms},
                   {"alternative", alone ? nlohmann::json() : nlohmann::json(d.alternative)},
                   {"alternative_ms", alone ? nlohmann::json() : nlohmann::json(d.alternative_ms)},
                   {"no_alternative", alone ? nlohmann::json(d.no_alternative) : nlohmann::json()},
                   {"saving", d.saving()}});
  }
  return why;
}

nlohmann::json verification_json(const Verification& v) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const VerifiedCandidate& c : v.candidates) {
    candidates.push_back({{"round", c.round},
                          {"source", c.source},
                          {"predicted_ms", c.predicted.cost_ms},
                          {"measured_ms", c.measured_ms},
                          {"shards", c.plan.shards.size()}});
    if (c.passes_ms.size() > 1) candidates.back()["measured_passes_ms"] = c.passes_ms;
    if (!c.fresh_ms.empty()) candidates.back()["fresh_ms"] = c.fresh_ms;  // a leader's
  }
  nlohmann::json j = {{"truth", v.truth},   {"chosen", v.chosen},   {"verify_s", v.verify_s},
                      {"rounds", v.rounds}, {"leaders", v.leaders}, {"candidates", candidates}};
  if (const std::optional<RunnerUp> next = runner_up(v)) j["runner_up"] = runner_up_json(*next);
  if (!v.rivals_failed.empty()) j["rivals_failed"] = v.rivals_failed;
  if (!v.tables.empty()) {
    nlohmann::json tables = nlohmann::json::array();
    for (const Verification::TableAlone& t : v.tables) {
      tables.push_back(
          {{"name", t.name}, {"predicted_ms", t.predicted_ms}, {"measured_ms", t.measured_ms}});
    }
    j["tables"] = tables;
    j["tables_s"] = v.tables_s;
  }
  return j;
}

nlohmann::json model_source_json(const PlanResult& r) {
  const ModelSource& m = r.model_source;
  return {
      {"compute", m.hardware},
      {"batches", m.min_batch > 0 ? nlohmann::json({m.min_batch, m.max_batch}) : nlohmann::json()},
      {"comm", m.comm},
      {"comm_devices",
       m.min_devices > 0 ? nlohmann::json({m.min_devices, m.max_devices}) : nlohmann::json()},
      {"extrapolated", r.extrapolated},
      {"memory_gbps", m.bandwidths.memory_gbps},
      {"memory_source", m.bandwidths.memory_source},
      {"link_gbps", m.bandwidths.link_gbps},
      {"link_source", m.bandwidths.link_source}};
}

// The floors' line: what they divide by, and how far over them the plan's
// slowest device is predicted.
std::string floor_line(const PlanResult& r) {
  const Bandwidths& b = r.model_source.bandwidths;
  if (b.memory_gbps <= 0 && b.link_gbps <= 0) {
    return "physical floors: none (the model set gives no measured bandwidth)\n";
  }
  const auto bandwidth = [](double gbps, const std::string& source) {
    return gbps > 0 ? fmt::format("{:.{}f} GB/s ({})", gbps, gbps < 100 ? 1 : 0, source)
                    : std::string("unknown");
  };
  const DeviceCosts& c = r.predicted.devices[r.predicted.critical_device];
  const double floor = c.compute_floor_ms + c.comm_floor_ms;
  return fmt::format(
      "physical floors: memory {}, link {}; the critical device is {:.1f}x its "
      "floor {:.3f} ms\n",
      bandwidth(b.memory_gbps, b.memory_source), bandwidth(b.link_gbps, b.link_source),
      floor > 0 ? c.total_ms() / floor : 0.0, floor);
}

}  // namespace

nlohmann::json plan_to_json(const PlanTask& task, const PlanResult& r) {
  nlohmann::json j;
  j["format"] = kPlanFormat;
  j["version"] = kPlanVersion;
  j["algorithm"] = r.algorithm;
  j["cost_model"] = r.cost_model;
  j["batch_size"] = task.batch_size;
  j["num_devices"] = task.num_devices();
  j["device_memory_bytes"] = task.device_mem_bytes;
  if (!task.reserved_bytes.empty()) j["device_reserved_bytes"] = task.reserved_bytes;
  j["task"] = step_kind_names()[static_cast<size_t>(task.step)];
  if (task.topology.hierarchical(task.num_devices())) {
    j["topology"] = {{"devices_per_host", task.topology.devices_per_host},
                     {"inter_host_gbps", task.topology.inter_host_gbps},
                     {"inter_host_latency_us", task.topology.inter_host_latency_us}};
  }
  // How a shard's bytes follow from its shape: readers check each device's
  // shards against its capacity with it.
  j["memory_model"] = {{"optimizer_bytes_per_row", task.memory.optimizer_bytes_per_row},
                       {"optimizer_bytes_per_weight", task.memory.optimizer_bytes_per_weight}};
  std::vector<std::vector<const Shard*>> by_table(task.tables.size());
  for (const Shard& s : r.plan.shards) by_table[s.table].push_back(&s);
  const std::vector<int64_t> memory = table_memory_bytes(task, r.plan);
  for (int t = 0; t < task.num_tables(); ++t) {
    j["tables"][task.tables[t].name] = table_json(task, r.plan, t, by_table[t], memory[t]);
  }
  // JSON objects are unordered (and written sorted): the task's order too.
  j["table_order"] = nlohmann::json::array();
  for (const TableSpec& s : task.tables) j["table_order"].push_back(s.name);
  j["cost_model_source"] = model_source_json(r);
  j["predicted"] = prediction_json(task, r.predicted);
  j["predicted"]["lower_bound_ms"] = r.bound.total_ms();
  j["predicted"]["gap"] = r.gap();
  j["predicted"]["search_s"] = r.search_s;
  if (!r.search_summary.empty()) j["predicted"]["search"] = r.search_summary;
  j["predicted"]["floor_warnings"] = r.floor_warnings;
  if (!r.explanation.empty()) j["explanation"] = explanation_json(task, r.explanation);
  if (r.verification) {
    const Verification& v = *r.verification;
    j["measured"] = prediction_json(task, v.candidates[v.chosen].measured);
    j["verification"] = verification_json(v);
  }
  return j;
}

Imbalance imbalance_of(const std::vector<double>& values) {
  Imbalance m;
  const double n = static_cast<double>(values.size());
  double sum = 0, lo = 1e300, hi = 0;
  for (double v : values) sum += v, lo = std::min(lo, v), hi = std::max(hi, v);
  if (values.empty() || sum <= 0) return m;
  m.max_over_mean = hi / (sum / n);
  m.max_over_min = lo > 0 ? hi / lo : std::numeric_limits<double>::infinity();
  for (double v : values) {
    const double share = v / sum;
    m.total_variation += 0.5 * std::abs(share - 1 / n);
    if (share > 0) m.kl_divergence += share * std::log(share * n);
  }
  return m;
}

std::optional<RunnerUp> runner_up(const Verification& v) {
  const auto among = [&](const VerifiedCandidate& c) {
    return v.leaders == 0 || !c.fresh_ms.empty();
  };
  int next = -1;
  for (size_t i = 0; i < v.candidates.size(); ++i) {
    const VerifiedCandidate& c = v.candidates[i];
    if (static_cast<int>(i) == v.chosen || !among(c)) continue;
    if (next < 0 || c.measured_ms < v.candidates[next].measured_ms) next = static_cast<int>(i);
  }
  if (next < 0) return std::nullopt;
  RunnerUp r;
  r.candidate = next;
  const double chosen = v.candidates[v.chosen].measured_ms;
  r.lead_pct = 100 * (v.candidates[next].measured_ms - chosen) / chosen;
  std::vector<double> spans;
  for (const VerifiedCandidate& c : v.candidates) {
    if (c.fresh_ms.empty()) continue;
    std::vector<double> figures = c.fresh_ms;
    if (!c.passes_ms.empty()) figures.push_back(fastest_half_mean(c.passes_ms));
    const auto [low, high] = std::minmax_element(figures.begin(), figures.end());
    spans.push_back(100 * (*high - *low) / median(figures));
  }
  if (v.leaders > 0 && !spans.empty()) r.span_pct = median(spans);
  return r;
}

nlohmann::json runner_up_json(const RunnerUp& r) {
  nlohmann::json j = {{"candidate", r.candidate}, {"lead_pct", r.lead_pct}};
  if (r.span_pct) {
    j["span_pct"] = *r.span_pct;
    j["tie"] = r.tie();
  }
  return j;
}

namespace {

std::string runner_up_line(const Verification& v) {
  const std::optional<RunnerUp> r = runner_up(v);
  if (!r) return "";
  std::string line =
      fmt::format("runner-up: candidate {}, {:.1f}% above the chosen", r->candidate, r->lead_pct);
  if (r->span_pct) {
    line += fmt::format("; a leader's own measurements span {:.1f}% (median over the leaders): {}",
                        *r->span_pct,
                        r->tie() ? "a tie within the measurement" : "a lead beyond it");
  }
  return line + "\n";
}

}  // namespace

std::string verification_report(const Verification& v) {
  TextTable table({"candidate", "round", "proposed by", "predicted ms", "measured ms",
                   "measured / predicted", "shards"});
  std::vector<std::string> rivals;  // the sources other than the search's, in order
  for (size_t i = 0; i < v.candidates.size(); ++i) {
    const VerifiedCandidate& c = v.candidates[i];
    if (c.source != v.candidates.front().source) rivals.push_back(c.source + "'s");
    const char* mark = static_cast<int>(i) == v.chosen ? " (chosen)"
                       : c.fresh_ms.empty()             ? ""
                                                        : " (leader)";
    table.add_row({fmt::format("{}{}", i, mark),
                   std::to_string(c.round + 1), c.source,
                   fmt::format("{:.3f}", c.predicted.cost_ms),
                   fmt::format("{:.3f}", c.measured_ms),
                   fmt::format("{:.3f}", c.measured_ms / c.predicted.cost_ms),
                   std::to_string(c.plan.shards.size())});
  }
  const double first = v.candidates.front().measured_ms;
  const double chosen = v.candidates[v.chosen].measured_ms;
  const std::string against =
      v.chosen == 0 ? "the search's own pick measured fastest"
                    : fmt::format("{:.1f}% below the search's own pick",
                                  100 * (first - chosen) / first);
  const size_t searched = v.candidates.size() - rivals.size();
  const std::string plans =
      (v.rounds == 1 ? fmt::format("the search's {} best plans", searched)
                     : fmt::format("{} plans from {} rounds of search (each after the first "
                                   "against the model corrected by the devices measured before)",
                                   searched, v.rounds)) +
      (rivals.empty() ? "" : fmt::format(" and {}", fmt::join(rivals, " and ")));
  std::string tables;
  if (!v.tables.empty()) {
    // The three the model misread most, by the log of measured / predicted.
    std::vector<Verification::TableAlone> far = v.tables;
    const auto off = [](const Verification::TableAlone& t) {
      return std::abs(std::log(t.measured_ms / t.predicted_ms));
    };
    std::stable_sort(far.begin(), far.end(),
                     [&](const auto& a, const auto& b) { return off(a) > off(b); });
    far.resize(std::min<size_t>(far.size(), 3));
    std::vector<std::string> named;
    for (const auto& t : far) {
      named.push_back(fmt::format("'{}' {:.2f}x", t.name, t.measured_ms / t.predicted_ms));
    }
    tables = fmt::format("; first each of the {} tables alone ({:.1f} s; measured / predicted "
                         "furthest from 1: {}), every search against the model corrected by "
                         "them",
                         v.tables.size(), v.tables_s, fmt::join(named, ", "));
  }
  std::string failed;
  for (const std::string& why : v.rivals_failed) failed += "no rival plan: " + why + "\n";
  std::string passes =
      v.comm_passes == 1 ? ""
                         : fmt::format(", each {} times (the mean of its fastest half)",
                                       v.comm_passes);
  if (v.leaders > 0) {
    passes += fmt::format("; the {} leading {} times more, compute afresh, and chosen among on "
                          "the median",
                          v.leaders, v.candidates[v.chosen].fresh_ms.size());
  }
  const VerifiedCandidate& pick = v.candidates[v.chosen];
  const std::string whose = pick.source == v.candidates.front().source
                                ? ""
                                : fmt::format(" ({}'s plan)", pick.source);
  return fmt::format("verification: {}, measured ({}){}{}, in {:.1f} s\n{}{}"
                     "chosen: candidate {}{}, {:.3f} ms measured: {}\n{}",
                     plans, v.truth, passes, tables, v.verify_s, table.render(), failed, v.chosen,
                     whose, chosen, against, runner_up_line(v));
}

std::string piece_text(int cols, int64_t row_offset, int64_t rows, int64_t table_rows, bool replica) {
  if (replica) return "all";
  if (rows == table_rows) return std::to_string(cols);
  return fmt::format("{}[{}:{}]", cols, row_offset, row_offset + rows);
}

std::string shard_text(int device, int cols, int64_t row_offset, int64_t rows, int64_t table_rows,
                       bool replica) {
  return std::to_string(device) + ":" + piece_text(cols, row_offset, rows, table_rows, replica);
}

namespace {

void add_table_rows(const PlanTask& task, const PlanResult& r, std::string& out) {
  TextTable table({"table", "sharding", "rows", "dim", "type", "pooling", "memory MB",
                   "shards (device:cols[rows])"});
  table.align_left(7);
  std::vector<std::string> where(task.tables.size());
  for (const Shard& s : r.plan.shards) {
    std::string& w = where[s.table];
    if (!w.empty()) w += " ";
    w += shard_text(s.device, s.cols, s.row_offset, s.rows, task.tables[s.table].rows, s.replica);
  }
  const std::vector<int64_t> memory = table_memory_bytes(task, r.plan);  // as the JSON's
  for (int t = 0; t < task.num_tables(); ++t) {
    const TableSpec& s = task.tables[t];
    table.add_row({s.name, sharding_type(task, r.plan, t), std::to_string(s.rows),
                   std::to_string(s.dim), data_type_name(s.data_type),
                   fmt::format("{:.2f}", s.pooling_factor), fmt::format("{:.1f}", memory[t] / 1e6),
                   where[t]});
  }
  out += table.render() + "\n";
}

}  // namespace

std::string sharding_type_summary(const PlanTask& task, const Plan& plan) {
  std::map<std::string, int> count;
  for (int t = 0; t < task.num_tables(); ++t) ++count[sharding_type(task, plan, t)];
  std::string out = "sharding types:";
  bool first = true;
  for (const std::string& name : sharding_type_names()) {
    if (count[name] == 0) continue;
    out += fmt::format("{} {} {}", first ? "" : ",", count[name], name);
    first = false;
  }
  if (task.types.mask != ShardingTypes::all().mask) out += " (allowed: " + task.types.str() + ")";
  return out;
}

namespace {

// Reports of many devices show this many rows, the costliest, unless asked
// for every device.
constexpr int kDeviceRowsShown = 16;

// A row per device; past 2 x kDeviceRowsShown devices (and unless `all`), the
// costliest kDeviceRowsShown and a line summing up the rest.
std::string device_rows(const PlanTask& task, const PlanResult& r, bool all) {
  TextTable table({"device", "memory GB", "memory %", "compute ms", "fwd comm ms", "bwd comm ms",
                   "total ms", "floor ms", "shards", "dim sum", "input MB", "output MB"});
  const int n = task.num_devices();
  std::vector<int> shown(n);
  std::iota(shown.begin(), shown.end(), 0);
  const bool cut = !all && n > 2 * kDeviceRowsShown;
  if (cut) {
    std::stable_sort(shown.begin(), shown.end(), [&](int a, int b) {
      return r.predicted.devices[a].total_ms() > r.predicted.devices[b].total_ms();
    });
    shown.resize(kDeviceRowsShown);
  }
  for (int d : shown) {
    const DeviceCosts& c = r.predicted.devices[d];
    table.add_row({fmt::format("{}{}", d, d == r.predicted.critical_device ? " *" : ""),
                   fmt::format("{:.3f}", c.memory_bytes / 1e9),
                   fmt::format("{:.1f}", 100.0 * c.memory_bytes / task.device_mem_bytes[d]),
                   fmt::format("{:.3f}", c.compute_ms), fmt::format("{:.3f}", c.fwd_comm_ms),
                   fmt::format("{:.3f}", c.bwd_comm_ms), fmt::format("{:.3f}", c.total_ms()),
                   fmt::format("{:.3f}", c.compute_floor_ms + c.comm_floor_ms),
                   std::to_string(c.num_shards), fmt::format("{:.0f}", c.dim_sum),
                   fmt::format("{:.2f}", c.input_bytes / 1e6),
                   fmt::format("{:.2f}", c.output_bytes / 1e6)});
  }
  std::string out = table.render();
  if (!cut) return out;
  std::vector<double> total, memory;
  for (int d = 0; d < n; ++d) {
    total.push_back(r.predicted.devices[d].total_ms());
    memory.push_back(100.0 * r.predicted.devices[d].memory_bytes / task.device_mem_bytes[d]);
  }
  const auto range = [](std::vector<double> v, const char* format) {
    std::sort(v.begin(), v.end());
    return fmt::format("{} / {} / {}", fmt::format(fmt::runtime(format), v.front()),
                       fmt::format(fmt::runtime(format), v[v.size() / 2]),
                       fmt::format(fmt::runtime(format), v.back()));
  };
  return out + fmt::format(
                   "the {} costliest of {} devices; all of them, min / median / max: total ms "
                   "{}, memory % {} (--verbose: every device)\n",
                   kDeviceRowsShown, n, range(total, "{:.3f}"), range(memory, "{:.1f}"));
}

}  // namespace

std::string plan_report(const PlanTask& task, const PlanResult& r, bool per_table) {
  std::string out;
  if (per_table) add_table_rows(task, r, out);
  out += device_rows(task, r, per_table);
  out += host_report(task, r.predicted);
  out += fmt::format(
      "plan {} with cost model {}: {} on {}, batch {}\n"
      "cost model measured on: {}\n"
      "{}\n"
      "predicted cost {:.3f} ms (critical device {}, marked *); imbalance {:.3f} (max / mean "
      "device total)\n"
      "lower bound {:.3f} ms (largest piece {:.3f} + comm {:.3f}; fused work / devices {:.3f} + "
      "mean comm {:.3f}); gap {:.1f}%{}\n"
      "{}"
      "{}\n"
      "search time {:.3f} s{}\n",
      r.algorithm, r.cost_model, count_of(task.num_tables(), "table"),
      count_of(task.num_devices(), "device"), task.batch_size,
      describe(r.model_source),
      !r.extrapolated.empty() ? fmt::format("extrapolated: {}", fmt::join(r.extrapolated, "; "))
      : r.model_source.min_devices > 0 || task.num_devices() == 1
          ? std::string("extrapolated: no (this batch and device count were measured)")
          : std::string("extrapolated: no batch outside the measured ones (the communication "
                        "model records no device counts to check against)"),
      r.predicted.cost_ms, r.predicted.critical_device, r.predicted.imbalance, r.bound.total_ms(),
      r.bound.piece_ms, r.bound.comm_ms, r.bound.work_ms, r.bound.mean_comm_ms, 100.0 * r.gap(),
      r.gap() < 0 ? " (negative: the cost model breaks the bound's assumptions here: it is not "
                    "monotone, or fusing costs more than running apart; docs/guide.md)"
                  : "",
      imbalance_lines(r.predicted), sharding_type_summary(task, r.plan), r.search_s,
      r.search_summary.empty() ? "" : "; " + r.search_summary);
  out += memory_lines(task);
  out += floor_line(r);
  for (const std::string& w : r.floor_warnings) out += "warning: " + w + "\n";
  if (r.verification) out += verification_report(*r.verification);
  if (!r.explanation.empty()) out += explain_report(task, r.explanation);
  return out;
}

}  // namespace embshard

namespace embshard {

nlohmann::json iteration_trace(const PlanTask& task, const Plan& plan, const PlanPrediction& p,
                               const std::string& label, const PlanPrediction* predicted,
                               const std::string& predicted_label) {
  nlohmann::json events = nlohmann::json::array();
  // Each device's pieces, named as the terminal report's shard column less
  // the device (the lane says it).
  const size_t n = p.devices.size();
  std::vector<nlohmann::json> pieces(n, nlohmann::json::array());
  for (const Shard& s : plan.shards) {
    if (s.device < 0 || static_cast<size_t>(s.device) >= n) continue;
    const TableSpec& t = task.tables[s.table];
    pieces[s.device].push_back(
        t.name + " " + piece_text(s.cols, s.row_offset, s.rows, t.rows, s.replica));
  }
  // One process per figure set: its devices' tracks.
  const auto add = [&](int pid, const PlanPrediction& costs, const std::string& name) {
    // The forward all-to-all of device d waits for the last device to finish
    // (comm models: wait = max delay - own delay, delay = compute + backward
    // all-to-all over the fastest device's); what is left is the transfer.
    double fastest = 1e300;
    for (const DeviceCosts& c : costs.devices) fastest = std::min(fastest, c.compute_ms + c.bwd_comm_ms);
    double max_delay = 0;
    for (const DeviceCosts& c : costs.devices) {
      max_delay = std::max(max_delay, c.compute_ms + c.bwd_comm_ms - fastest);
    }
    const auto slice = [&](size_t d, const char* what, const char* category, double start_ms,
                           double ms, nlohmann::json args = nullptr) {
      if (ms <= 0) return;
      events.push_back({{"name", what},
                        {"cat", category},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", d},
                        {"ts", 1e3 * start_ms},  // microseconds
                        {"dur", 1e3 * ms}});
      if (!args.is_null()) events.back()["args"] = std::move(args);
    };
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    for (size_t d = 0; d < costs.devices.size(); ++d) {
      const DeviceCosts& c = costs.devices[d];
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", d},
                        {"args", {{"name", fmt::format("device {}{}", d,
                                                       static_cast<int>(d) == costs.critical_device
                                                           ? " (critical)"
                                                           : "")}}}});
      const double delay = c.compute_ms + c.bwd_comm_ms - fastest;
      const double wait = std::min(c.fwd_comm_ms, std::max(0.0, max_delay - delay));
      // In the models' order: the wait follows the backward all-to-all, whose
      // time counts in the delay, so every forward transfer starts together,
      // when the last device is done.
      const double done = c.compute_ms + c.bwd_comm_ms;
      slice(d, "fused embedding compute (fwd + bwd + update)", "compute", 0, c.compute_ms,
            {{"pieces", d < n ? pieces[d] : nlohmann::json::array()}});
      slice(d, "backward all-to-all", "comm", c.compute_ms, c.bwd_comm_ms);
      slice(d, "wait for the last device", "wait", done, wait);
      slice(d, "forward all-to-all", "comm", done + wait, c.fwd_comm_ms - wait);
    }
  };
  add(0, p, label);
  if (predicted != nullptr) add(1, *predicted, predicted_label);
  nlohmann::json other = {{"what", label},
                          {"tables", task.num_tables()},
                          {"devices", task.num_devices()},
                          {"batch_size", task.batch_size},
                          {"cost_ms", p.cost_ms}};
  if (predicted != nullptr) other["predicted_cost_ms"] = predicted->cost_ms;
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
}

}  // namespace embshard
