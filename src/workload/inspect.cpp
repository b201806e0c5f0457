// A workload's statistics for people (`embshard inspect`, the demo).
#include "embshard/workload/inspect.h"

#include <algorithm>
#include <array>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/util/units.h"

namespace embshard {

using nlohmann::json;

WorkloadInspection inspect_workload(const std::string& dir, const std::string& compare_profile,
                                    const std::string& stats_dir) {
  WorkloadInspection in;
  in.workload = load_workload(dir);
  Workload& w = in.workload;
  in.from_trace = w.trace_file.has_value();
  if (in.from_trace) {
    TraceReader reader(w.trace_path());
    for (size_t t = 0; t < w.tables.size(); ++t) {
      const std::string context = fmt::format("{}: table {} ('{}')", w.trace_path(), t,
                                              w.tables[t].name);
      in.stats.push_back(compute_table_stats(reader.read_table(t), w.tables[t].rows, context));
      fill_table_spec(in.stats.back(), w.tables[t]);
    }
  } else {
    for (const TableSpec& spec : w.tables) {
      in.stats.push_back(table_stats_from_spec(spec, w.batch_size));
    }
  }
  in.aggregate = aggregate_stats(w.tables, in.stats, w.batch_size);
  if (!compare_profile.empty()) {
    in.published = load_published_profile(compare_profile, stats_dir);
    in.comparison = compare_to_published(in.aggregate, *in.published);
  }
  return in;
}

WorkloadInspection inspect_specs(const Workload& workload, const std::string& compare_profile) {
  WorkloadInspection in;
  in.workload = workload;
  for (const TableSpec& spec : workload.tables) {
    in.stats.push_back(table_stats_from_spec(spec, workload.batch_size));
  }
  in.aggregate = aggregate_stats(workload.tables, in.stats, workload.batch_size);
  if (!compare_profile.empty()) {
    in.published = load_published_profile(compare_profile);
    in.comparison = compare_to_published(in.aggregate, *in.published);
  }
  return in;
}

namespace {

std::string grouped(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}


// The three bins holding most of a table's lookups: "(2, 4] 31%".
std::string top_bins(const ReuseHistogram& lookups) {
  std::array<int, kReuseBins> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return lookups[a] > lookups[b]; });
  std::string out;
  for (int i = 0; i < 3 && lookups[order[i]] > 0; ++i) {
    // 18 columns an entry, and a space after even the widest ("(16384, 32768] 23%").
    out += fmt::format("{:<17} ", fmt::format("{} {:.0f}%", reuse_bin_label(order[i]),
                                              100 * lookups[order[i]]));
  }
  return out;
}

std::string tables_text(const Workload& w) {
  std::string out = fmt::format("{:<12} {:>13} {:>5} {:>9} {:>12}  {:<54} {:>11}\n", "table", "rows", "dim",
             "pooling", "unique rows", "top reuse bins (share of lookups)", "weights");
  for (const TableSpec& t : w.tables) {
    out += fmt::format("{:<12} {:>13} {:>5} {:>9.2f} {:>12}  {:<54} {:>11}\n", t.name, grouped(t.rows),
               t.dim, t.pooling_factor, grouped(t.unique_rows), top_bins(t.lookup_reuse),
               format_bytes(static_cast<double>(t.weight_bytes())));
  }
  return out;
}

std::string histograms_text(const WorkloadInspection& in) {
  const WorkloadStats& a = in.aggregate;
  std::string out = fmt::format("\n  {:<16} {:>11} {:>11}", "reuse bin", "rows", "lookups");
  if (in.published) out += fmt::format(" {:>16} {:>16}", "published rows", "published lookups");
  out += "\n";
  for (int k = 0; k < kReuseBins; ++k) {
    out += fmt::format("  {:<16} {:>10.2f}% {:>10.2f}%", reuse_bin_label(k), 100 * a.row_reuse[k],
               100 * a.lookup_reuse[k]);
    if (in.published) {
      out += fmt::format(" {:>15.2f}% {:>15.2f}%", 100 * in.published->row_reuse[k],
                         100 * in.published->lookup_reuse[k]);
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string inspection_text(const WorkloadInspection& in) {
  const Workload& w = in.workload;
  const WorkloadStats& a = in.aggregate;
  std::string out = fmt::format("workload  {}\nsource    {}\ntables    {}, batch {}, statistics from {}\n\n", w.dir,
             w.source.empty() ? "-" : w.source, w.tables.size(), w.batch_size,
             in.from_trace ? "the trace (" + *w.trace_file + ")" : "tables.json (no trace)");
  out += tables_text(w);
  out += "\naggregate\n";
  out += fmt::format("  lookups             {}\n", grouped(a.num_indices));
  out += fmt::format("  unique rows         {}  (unique ratio {:.4f})\n", grouped(a.unique_rows),
             a.unique_ratio);
  out += fmt::format("  avg pooling factor  {:.3f}  (per table: min {:.2f}, median {:.2f}, max {:.2f})\n",
             a.avg_pooling_factor, a.pooling.min, a.pooling.median, a.pooling.max);
  out += fmt::format("  rows per table      min {}, median {}, max {}\n", grouped(a.rows.min),
             grouped(static_cast<int64_t>(a.rows.median)), grouped(a.rows.max));
  out += fmt::format("  dims                min {}, median {}, max {}\n", a.dims.min, a.dims.median,
             a.dims.max);
  out += fmt::format("  weights             {} ({} bytes, in the tables' data types)\n",
                     format_bytes(a.weight_bytes), grouped(a.weight_bytes));
  out += histograms_text(in);
  if (in.published) {
    const PublishedComparison& c = in.comparison;
    out += fmt::format("\ncompared to profile {} ({}): avg pooling {:.3f} ({:+.2f}%), unique ratio {:.4f} "
               "({:+.2f}%), TV rows {:.4f}, TV lookups {:.4f}\n",
               in.published->profile, in.published->dataset, in.published->avg_pooling_factor,
               100 * c.pooling_rel_error, in.published->unique_ratio,
               100 * c.unique_ratio_rel_error, c.row_reuse_tv, c.lookup_reuse_tv);
  }
  return out;
}

namespace {

json summary_json(const Summary& s) { return {{"min", s.min}, {"median", s.median}, {"max", s.max}}; }

}  // namespace

json inspection_json(const WorkloadInspection& in) {
  const Workload& w = in.workload;
  const WorkloadStats& a = in.aggregate;
  json tables = json::array();
  for (size_t t = 0; t < w.tables.size(); ++t) {
    json j = table_to_json(w.tables[t]);
    j["num_indices"] = in.stats[t].num_indices;
    j["weight_bytes"] = w.tables[t].weight_bytes();
    tables.push_back(j);
  }
  std::vector<std::string> labels;
  for (int k = 0; k < kReuseBins; ++k) labels.push_back(reuse_bin_label(k));
  json out{{"workload", w.dir},
           {"source", w.source},
           {"batch_size", w.batch_size},
           {"num_tables", w.tables.size()},
           {"stats_from", in.from_trace ? "trace" : "specs"},
           {"reuse_bins", labels},
           {"tables", tables},
           {"aggregate",
            {{"num_tables", a.num_tables},
             {"batch_size", a.batch_size},
             {"num_indices", a.num_indices},
             {"unique_rows", a.unique_rows},
             {"avg_pooling_factor", a.avg_pooling_factor},
             {"unique_ratio", a.unique_ratio},
             {"row_reuse_histogram", a.row_reuse},
             {"lookup_reuse_histogram", a.lookup_reuse},
             {"weight_bytes", a.weight_bytes},
             {"rows", summary_json(a.rows)},
             {"dims", summary_json(a.dims)},
             {"pooling_factor", summary_json(a.pooling)}}}};
  if (in.published) {
    const PublishedStats& p = *in.published;
    const PublishedComparison& c = in.comparison;
    out["comparison"] = {{"profile", p.profile},
                         {"dataset", p.dataset},
                         {"file", p.file},
                         {"avg_pooling_factor", p.avg_pooling_factor},
                         {"unique_ratio", p.unique_ratio},
                         {"row_reuse_histogram", p.row_reuse},
                         {"lookup_reuse_histogram", p.lookup_reuse},
                         {"row_reuse_tv", c.row_reuse_tv},
                         {"lookup_reuse_tv", c.lookup_reuse_tv},
                         {"pooling_rel_error", c.pooling_rel_error},
                         {"unique_ratio_rel_error", c.unique_ratio_rel_error}};
  }
  return out;
}

std::string inspection_summary(const WorkloadInspection& in) {
  const Workload& w = in.workload;
  const WorkloadStats& a = in.aggregate;
  std::string out = fmt::format("workload {}: {} tables x batch {}, {} of weights\n",
                                w.dir.empty() ? w.source : w.dir, w.tables.size(), w.batch_size,
                                format_bytes(a.weight_bytes));
  if (in.published) {
    const PublishedStats& p = *in.published;
    out += fmt::format("  avg pooling factor {:.2f} (published {:.2f}), unique ratio {:.4f} "
                       "(published {:.4f})\n",
                       a.avg_pooling_factor, p.avg_pooling_factor, a.unique_ratio,
                       p.unique_ratio);
    out += fmt::format("  reuse histograms vs published: total variation {:.4f} (rows), {:.4f} "
                       "(lookups)\n",
                       in.comparison.row_reuse_tv, in.comparison.lookup_reuse_tv);
  }
  return out;
}

}  // namespace embshard
