// embshard inspect: per-table and aggregate statistics of a workload.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "embshard/util/error.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/workload.h"

namespace embshard::cli {
namespace {

using nlohmann::json;

struct InspectArgs {
  std::string dir;
  bool json = false;
  std::string compare_profile;  // "" = no comparison
  std::string stats_dir;
};

struct Inspection {
  Workload workload;
  std::vector<TableStats> stats;  // per table
  bool from_trace = false;
  WorkloadStats aggregate;
  std::optional<PublishedStats> published;
  Calibration calibration;
};

// Recomputes every table's statistics from the trace, one table in memory at
// a time; spec-only workloads fall back to the figures in tables.json.
Inspection inspect(const InspectArgs& args) {
  Inspection in;
  in.workload = load_workload(args.dir);
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
  if (!args.compare_profile.empty()) {
    in.published = load_published_profile(args.compare_profile, args.stats_dir);
    in.calibration = compare_to_published(in.aggregate, *in.published);
  }
  return in;
}

std::string grouped(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

// The three bins holding most of a table's lookups: "(2, 4] 31%".
std::string top_bins(const ReuseHistogram& lookups) {
  std::array<int, kReuseBins> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return lookups[a] > lookups[b]; });
  std::string out;
  for (int i = 0; i < 3 && lookups[order[i]] > 0; ++i) {
    out += fmt::format("{:<18}", fmt::format("{} {:.0f}%", reuse_bin_label(order[i]),
                                             100 * lookups[order[i]]));
  }
  return out;
}

void print_tables(const Workload& w) {
  fmt::print("{:<12} {:>13} {:>5} {:>9} {:>12}  {:<54} {:>11}\n", "table", "rows", "dim",
             "pooling", "unique rows", "top reuse bins (share of lookups)", "weights");
  for (const TableSpec& t : w.tables) {
    fmt::print("{:<12} {:>13} {:>5} {:>9.2f} {:>12}  {:<54} {:>11}\n", t.name, grouped(t.rows),
               t.dim, t.pooling_factor, grouped(t.unique_rows), top_bins(t.lookup_reuse),
               human_bytes(static_cast<double>(t.weight_bytes())));
  }
}

void print_histograms(const Inspection& in) {
  const WorkloadStats& a = in.aggregate;
  fmt::print("\n  {:<16} {:>11} {:>11}", "reuse bin", "rows", "lookups");
  if (in.published) fmt::print(" {:>16} {:>16}", "published rows", "published lookups");
  fmt::print("\n");
  for (int k = 0; k < kReuseBins; ++k) {
    fmt::print("  {:<16} {:>10.2f}% {:>10.2f}%", reuse_bin_label(k), 100 * a.row_reuse[k],
               100 * a.lookup_reuse[k]);
    if (in.published) {
      fmt::print(" {:>15.2f}% {:>15.2f}%", 100 * in.published->row_reuse[k],
                 100 * in.published->lookup_reuse[k]);
    }
    fmt::print("\n");
  }
}

void print_text(const Inspection& in) {
  const Workload& w = in.workload;
  const WorkloadStats& a = in.aggregate;
  fmt::print("workload  {}\nsource    {}\ntables    {}, batch {}, statistics from {}\n\n", w.dir,
             w.source.empty() ? "-" : w.source, w.tables.size(), w.batch_size,
             in.from_trace ? "the trace (" + *w.trace_file + ")" : "tables.json (no trace)");
  print_tables(w);
  fmt::print("\naggregate\n");
  fmt::print("  lookups             {}\n", grouped(a.num_indices));
  fmt::print("  unique rows         {}  (unique ratio {:.4f})\n", grouped(a.unique_rows),
             a.unique_ratio);
  fmt::print("  avg pooling factor  {:.3f}  (per table: min {:.2f}, median {:.2f}, max {:.2f})\n",
             a.avg_pooling_factor, a.pooling.min, a.pooling.median, a.pooling.max);
  fmt::print("  rows per table      min {}, median {}, max {}\n", grouped(a.rows.min),
             grouped(static_cast<int64_t>(a.rows.median)), grouped(a.rows.max));
  fmt::print("  dims                min {}, median {}, max {}\n", a.dims.min, a.dims.median,
             a.dims.max);
  fmt::print("  weights             {} ({} bytes, fp32)\n", human_bytes(a.weight_bytes),
             grouped(a.weight_bytes));
  print_histograms(in);
  if (in.published) {
    const Calibration& c = in.calibration;
    fmt::print("\ncompared to profile {} ({}): avg pooling {:.3f} ({:+.2f}%), unique ratio {:.4f} "
               "({:+.2f}%), TV rows {:.4f}, TV lookups {:.4f}\n",
               in.published->profile, in.published->dataset, in.published->avg_pooling_factor,
               100 * c.pooling_rel_error, in.published->unique_ratio,
               100 * c.unique_ratio_rel_error, c.row_reuse_tv, c.lookup_reuse_tv);
  }
}

json summary_json(const Summary& s) { return {{"min", s.min}, {"median", s.median}, {"max", s.max}}; }

json to_json(const Inspection& in) {
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
    const Calibration& c = in.calibration;
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

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Print per-table and aggregate statistics of a workload (recomputed from its "
                 "trace)");
  cmd->add_option("workload", args->dir, "Workload directory (tables.json [+ trace.bin])")
      ->required();
  cmd->add_flag("--json", args->json, "Print JSON (documented in docs/cli.md)");
  cmd->add_option("--compare", args->compare_profile,
                  "Also report the distance to a published profile: 2021 | 2022");
  cmd->add_option("--stats-dir", args->stats_dir,
                  "Directory of the published statistics files (default: the repo's "
                  "data/published)");
  cmd->callback([args] {
    const Inspection in = inspect(*args);
    if (args->json) {
      std::cout << to_json(in).dump(2) << "\n";
    } else {
      print_text(in);
    }
  });
}

}  // namespace embshard::cli
