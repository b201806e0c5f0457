// Several eval record files read as one report (eval/combine.h).
#include "embshard/eval/combine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/util/error.h"
#include "embshard/util/json_field.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"
#include "embshard/util/units.h"

namespace embshard {

using nlohmann::json;

namespace {

// How a file's communication was had: measured under mpirun, or modelled.
bool comm_measured(const EvalSet& set) {
  return json_field(set.header, "/comm", JsonKind::kString, set.path)
             .get<std::string>()
             .starts_with("measured");
}

bool predicted_only(const EvalSet& set) { return set.header.value("predict_only", false); }

std::vector<std::string> header_algos(const EvalSet& set) {
  return json_field(set.header, "/algos", JsonKind::kStrings, set.path)
      .get<std::vector<std::string>>();
}

// Error unless every file can stand beside the first.
void check_comparable(const std::vector<EvalSet>& sets) {
  const EvalSet& first = sets.front();
  std::map<std::string, std::string> seen;  // canonical path -> as given
  for (const EvalSet& set : sets) {
    std::error_code ec;
    const std::string canonical = std::filesystem::weakly_canonical(set.path, ec).string();
    const auto [it, fresh] = seen.emplace(ec ? set.path : canonical, set.path);
    ES_CHECK(fresh, "{}: given twice (also as {}): its tasks would count twice", set.path,
             it->second);
    ES_CHECK(set.header.at("devices") == first.header.at("devices"),
             "{}: devices is {}, but {} has {}: sets of one device count combine", set.path,
             set.header.at("devices").dump(), first.path, first.header.at("devices").dump());
    ES_CHECK(predicted_only(set) == predicted_only(first),
             "{}: {}, but {} is {}: predicted and measured costs do not combine", set.path,
             predicted_only(set) ? "predicted only" : "measured",
             first.path, predicted_only(first) ? "predicted only" : "measured");
    ES_CHECK(comm_measured(set) == comm_measured(first),
             "{}: comm is \"{}\", but {} has \"{}\": measured and modelled communication do not "
             "combine",
             set.path, set.header.at("comm").get<std::string>(), first.path,
             first.header.at("comm").get<std::string>());
  }
}

// The algorithms asked for, each in every file; none asked: those in every
// file, in the first file's order.
std::vector<std::string> compared_algos(const std::vector<EvalSet>& sets,
                                        const std::vector<std::string>& asked) {
  std::vector<std::string> algos = asked.empty() ? header_algos(sets.front()) : asked;
  if (asked.empty()) {
    for (const EvalSet& set : sets) {
      const std::vector<std::string> has = header_algos(set);
      std::erase_if(algos, [&](const std::string& a) {
        return std::find(has.begin(), has.end(), a) == has.end();
      });
    }
    ES_CHECK(!algos.empty(), "no algorithm was evaluated in every file ({} has {})",
             sets.back().path, fmt::join(header_algos(sets.back()), ","));
    return algos;
  }
  for (const EvalSet& set : sets) {
    const std::vector<std::string> has = header_algos(set);
    for (const std::string& a : algos) {
      ES_CHECK(std::find(has.begin(), has.end(), a) != has.end(),
               "{}: no algorithm '{}' (it has {})", set.path, a, fmt::join(has, ","));
    }
  }
  return algos;
}

// Notes on what combines but may mislead: the same tasks twice, other
// models, sets that add nothing.
std::vector<std::string> notes_on(const CombinedEval& c) {
  std::vector<std::string> notes;
  const auto key = [](const EvalSet& s, const char* field) {
    return s.header.contains(field) ? s.header.at(field).dump() : std::string("none");
  };
  for (size_t i = 0; i < c.sets.size(); ++i) {
    const EvalSet& s = c.sets[i];
    for (size_t j = 0; j < i; ++j) {
      if (key(s, "tasks_crc32") != "none" && key(s, "tasks_crc32") == key(c.sets[j], "tasks_crc32") &&
          key(s, "pool") == key(c.sets[j], "pool")) {
        notes.push_back(fmt::format("{} and {} evaluate the same tasks of the same pool: a rerun, "
                                    "counted as a set of its own",
                                    c.sets[j].path, s.path));
      }
    }
    for (const char* field : {"cost_model", "model_dir", "executor"}) {
      if (key(s, field) != key(c.sets.front(), field)) {
        notes.push_back(fmt::format("{}: {} {}, {} has {}", s.path, field, key(s, field),
                                    c.sets.front().path, key(c.sets.front(), field)));
      }
    }
    if (c.per_set[i].tasks == 0) {
      notes.push_back(fmt::format("{}: no task that every algorithm planned: it adds nothing",
                                  s.path));
    }
  }
  return notes;
}

}  // namespace

EvalSet load_eval_set(const std::string& path) {
  EvalSet set{path, json(), {}};
  set.records = RecordFile::read_all(path, &set.header, nullptr);
  const json format = set.header.value("format", json());
  ES_CHECK(format == "embshard-eval",
           "{}: not an eval record file (its header's format is {}, expected \"embshard-eval\")",
           path, json_shown(format));
  json_field(set.header, "/devices", JsonKind::kCount, path);
  header_algos(set);
  comm_measured(set);
  return set;
}

namespace {

// The ratio of two algorithms' costs summed over the same tasks (0 when the
// reference sums to nothing).
double ratio_of_sums(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += a[i], den += b[i];
  return den > 0 ? num / den : 0;
}

// The reference of a summary: `against`'s index, else its best baseline;
// -1 when it counted no task.
int reference_of(const EvalSummary& s, int against) {
  if (s.tasks == 0) return -1;
  return against >= 0 ? against : s.best_baseline;
}

std::string reference_name(const CombinedEval& c, int reference) {
  return reference >= 0 ? c.algos[reference] : "-";
}

}  // namespace

CombinedEval combine_eval(const std::vector<std::string>& paths,
                          const std::vector<std::string>& algos, const std::string& against) {
  ES_CHECK(!paths.empty(), "no eval record file to combine");
  CombinedEval c;
  for (const std::string& path : paths) c.sets.push_back(load_eval_set(path));
  check_comparable(c.sets);
  c.algos = compared_algos(c.sets, algos);
  c.against = against;
  int against_index = -1;
  if (!against.empty()) {
    const auto it = std::find(c.algos.begin(), c.algos.end(), against);
    ES_CHECK(it != c.algos.end(), "--against {}: not among the algorithms compared ({})", against,
             fmt::join(c.algos, ","));
    against_index = static_cast<int>(it - c.algos.begin());
  }
  c.devices = c.sets.front().header.at("devices").get<int>();
  c.comm_source = c.sets.front().header.at("comm").get<std::string>();
  std::vector<json> all;
  std::vector<int> set_of;  // per record of `all`
  for (size_t i = 0; i < c.sets.size(); ++i) {
    const EvalSummary& s =
        c.per_set.emplace_back(summarize_eval(c.sets[i].records, c.algos, c.sets[i].path));
    const int reference = reference_of(s, against_index);
    c.set_reference.push_back(reference);
    std::vector<double>& ratios = c.set_ratio.emplace_back(c.algos.size(), 0.0);
    for (size_t a = 0; reference >= 0 && a < c.algos.size(); ++a) {
      ratios[a] = ratio_of_sums(s.algos[a].scores, s.algos[reference].scores);
    }
    all.insert(all.end(), c.sets[i].records.begin(), c.sets[i].records.end());
    set_of.insert(set_of.end(), c.sets[i].records.size(), static_cast<int>(i));
  }
  // The files were each read above: a record that fails here failed there.
  c.pooled = summarize_eval(all, c.algos);
  c.notes = notes_on(c);
  c.pooled_reference = reference_of(c.pooled, against_index);
  c.pooled_ratio.assign(c.algos.size(), 0);
  c.set_interval.assign(c.algos.size(), RatioInterval{});
  c.mean_set_ratio.assign(c.algos.size(), 0);
  if (c.pooled_reference < 0) return c;
  // Groups numbered over the sets that have a task counted.
  std::map<int, int> group_of;
  std::vector<int> groups;
  for (const size_t k : c.pooled.counted) {
    groups.push_back(group_of.emplace(set_of[k], static_cast<int>(group_of.size())).first->second);
  }
  const std::vector<double>& base = c.pooled.algos[c.pooled_reference].scores;
  for (size_t a = 0; a < c.algos.size(); ++a) {
    c.pooled_ratio[a] = ratio_of_sums(c.pooled.algos[a].scores, base);
    if (group_of.size() >= 2) {
      c.set_interval[a] =
          bootstrap_grouped_ratio_interval(c.pooled.algos[a].scores, base, groups, 0.95);
    }
    std::vector<double> ratios;
    for (size_t i = 0; i < c.sets.size(); ++i) {
      if (c.set_reference[i] >= 0) ratios.push_back(c.set_ratio[i][a]);
    }
    c.mean_set_ratio[a] = mean(ratios);
  }
  return c;
}

std::string combined_eval_report(const CombinedEval& c) {
  const std::string reference = c.against.empty() ? "best baseline" : c.against;
  std::vector<std::string> columns = {"set", "tasks", "x " + reference};
  columns.insert(columns.end(), c.algos.begin(), c.algos.end());
  TextTable table(columns);
  const auto ratio = [](double r) { return r > 0 ? fmt::format("{:.3f}", r) : std::string("-"); };
  for (size_t i = 0; i < c.sets.size(); ++i) {
    std::vector<std::string> row = {c.sets[i].path, std::to_string(c.per_set[i].tasks),
                                    reference_name(c, c.set_reference[i])};
    for (const double r : c.set_ratio[i]) row.push_back(ratio(r));
    table.add_row(row);
  }
  std::vector<std::string> mean_row = {"mean of the sets' ratios", "", ""};
  std::vector<std::string> pooled_row = {"pooled: every task", std::to_string(c.pooled.tasks),
                                         reference_name(c, c.pooled_reference)};
  std::vector<std::string> interval_row = {"95% CI, sets resampled", "", ""};
  for (size_t a = 0; a < c.algos.size(); ++a) {
    mean_row.push_back(ratio(c.mean_set_ratio[a]));
    pooled_row.push_back(ratio(c.pooled_ratio[a]));
    const RatioInterval& ci = c.set_interval[a];
    interval_row.push_back(ci.high > 0 ? fmt::format("{:.3f}-{:.3f}", ci.low, ci.high) : "-");
  }
  table.add_row(mean_row);
  table.add_row(pooled_row);
  table.add_row(interval_row);
  std::string out = fmt::format(
      "{} ({} tasks, {} devices), each set x its {}; pooled: the means over every task x the "
      "pooled {}'s, its interval from resampling whole sets (what moves a set's tasks together: "
      "its pool, its run)\n{}",
      count_of(static_cast<int64_t>(c.sets.size()), "set"), c.pooled.tasks, c.devices,
      c.against.empty() ? "own best baseline" : c.against, reference, table.render());
  for (const std::string& note : c.notes) out += "note: " + note + "\n";
  return out + "\npooled:\n" + eval_report(c.pooled, c.comm_source);
}

json combined_eval_json(const CombinedEval& c) {
  const auto figure = [](double r) { return r > 0 ? json(r) : json(); };
  const auto name = [&](int reference) {
    return reference >= 0 ? json(c.algos[reference]) : json();
  };
  json sets = json::array();
  for (size_t i = 0; i < c.sets.size(); ++i) {
    json ratios = json::object();
    for (size_t a = 0; a < c.algos.size(); ++a) ratios[c.algos[a]] = figure(c.set_ratio[i][a]);
    sets.push_back({{"path", c.sets[i].path},
                    {"tasks", c.per_set[i].tasks},
                    {"reference", name(c.set_reference[i])},
                    {"ratios", ratios}});
  }
  json pooled = eval_summary_json(c.pooled, c.comm_source);
  pooled["reference"] = name(c.pooled_reference);
  for (size_t a = 0; a < c.algos.size(); ++a) {
    json& x = pooled["algorithms"][c.algos[a]];
    const RatioInterval& ci = c.set_interval[a];
    x["ratio"] = figure(c.pooled_ratio[a]);
    x["ratio_ci95_sets"] = ci.high > 0 ? json::array({ci.low, ci.high}) : json();
    x["mean_set_ratio"] = figure(c.mean_set_ratio[a]);
  }
  return {{"against", c.against.empty() ? json() : json(c.against)},
          {"devices", c.devices},
          {"notes", c.notes},
          {"sets", sets},
          {"pooled", pooled}};
}

std::string combined_eval_svg(const CombinedEval& c) {
  const std::string reference = c.against.empty() ? "the best baseline" : c.against;
  // The axis: every ratio shown, and 1 (the best baseline), with a margin.
  double lo = 1, hi = 1;
  for (size_t a = 0; a < c.algos.size(); ++a) {
    for (const std::vector<double>& ratios : c.set_ratio) {
      if (ratios[a] > 0) lo = std::min(lo, ratios[a]), hi = std::max(hi, ratios[a]);
    }
    if (c.set_interval[a].high > 0) {
      lo = std::min(lo, c.set_interval[a].low), hi = std::max(hi, c.set_interval[a].high);
    }
  }
  lo = std::floor(lo * 20 - 1) / 20, hi = std::ceil(hi * 20 + 1) / 20;
  size_t longest = 0;
  for (const std::string& a : c.algos) longest = std::max(longest, a.size());
  constexpr double kRow = 36, kTop = 60, kPlot = 520;
  const double left = std::max(150.0, 16 + 7.0 * static_cast<double>(longest));
  const double width = left + kPlot + 190, height = kTop + c.algos.size() * kRow + 50;
  const auto x_of = [&](double r) { return left + (r - lo) / (hi - lo) * kPlot; };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"15\">{} cost x {}, {} ({} "
      "tasks, {} devices)</text>\n<text x=\"10\" y=\"40\" fill=\"#555\">dot: a set x its "
      "{}; bar: every task pooled x the pooled {}'s; [a-b]: 95% interval, sets resampled "
      "whole</text>\n",
      width, height, c.pooled.predicted_only ? "Predicted" : "Measured", reference,
      count_of(static_cast<int64_t>(c.sets.size()), "set"), c.pooled.tasks, c.devices,
      c.against.empty() ? "own best baseline" : c.against, reference);
  for (double t = std::ceil(lo * 20) / 20; t <= hi + 1e-9; t += 0.05) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.0f}\" stroke=\"{3}\" "
        "stroke-dasharray=\"{4}\"/>\n<text x=\"{0:.1f}\" y=\"{5:.0f}\" "
        "text-anchor=\"middle\" fill=\"#555\">{6:.2f}</text>\n",
        x_of(t), kTop - 8, height - 38, std::abs(t - 1) < 1e-9 ? "#333" : "#ddd",
        std::abs(t - 1) < 1e-9 ? "4,3" : "none", height - 24, t);
  }
  double y = kTop;
  for (size_t a = 0; a < c.algos.size(); ++a) {
    const double mid = y + kRow / 2;
    const std::string colour = is_baseline(c.algos[a]) ? "#1f77b4" : "#d62728";
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8,
                       mid + 4, xml_escaped(c.algos[a]));
    const double pooled = c.pooled_ratio[a];
    const RatioInterval& ci = c.set_interval[a];
    if (ci.high > 0) {
      svg += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
                         "stroke=\"{}\" stroke-width=\"2\"/>\n",
                         x_of(ci.low), x_of(ci.high), mid, mid, colour);
    }
    if (pooled > 0) {
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"4\" height=\"{:.0f}\" "
                         "fill=\"{}\"/>\n",
                         x_of(pooled) - 2, mid - kRow * 0.35, kRow * 0.7, colour);
    }
    for (size_t i = 0; i < c.sets.size(); ++i) {
      const double r = c.set_ratio[i][a];
      if (r <= 0) continue;
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" "
                         "fill-opacity=\"0.45\"><title>{}: {:.3f}</title></circle>\n",
                         x_of(r), mid, colour, xml_escaped(c.sets[i].path), r);
    }
    if (pooled > 0) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">x{:.3f}{}</text>\n", left + kPlot + 10,
                         mid + 4, pooled,
                         ci.high > 0 ? fmt::format(" [{:.3f}-{:.3f}]", ci.low, ci.high) : "");
    }
    y += kRow;
  }
  return svg + "</svg>\n";
}

}  // namespace embshard
