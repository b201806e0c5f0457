// Several eval record files read as one report (eval/combine.h).
#include "embshard/eval/combine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"
#include "embshard/util/units.h"

namespace embshard {

using nlohmann::json;

namespace {

bool comm_measured(const EvalSet& set) {
  return set.header.at("comm").get<std::string>().starts_with("measured");
}

bool predicted_only(const EvalSet& set) { return set.header.value("predict_only", false); }

std::vector<std::string> header_algos(const EvalSet& set) {
  return set.header.at("algos").get<std::vector<std::string>>();
}

// A header field as a message shows it ("absent" when the file has none).
std::string shown(const EvalSet& set, const std::string& pointer) {
  const json::json_pointer p(pointer);
  return set.header.contains(p) ? json_shown(set.header.at(p)) : "absent";
}

// Error unless every file can stand beside the first: the same devices,
// version, run's sharding types, kind of figures and of communication.
void check_comparable(const std::vector<EvalSet>& sets) {
  const EvalSet& first = sets.front();
  std::map<std::filesystem::path, std::string> seen;  // resolved -> as given
  for (const EvalSet& set : sets) {
    const auto [it, fresh] = seen.emplace(resolved_path(set.path), set.path);
    ES_CHECK(fresh, "{}: given twice (also as {}): its tasks would count twice", set.path,
             it->second);
    for (const char* field : {"/devices", "/version", "/sharding_types"}) {
      ES_CHECK(shown(set, field) == shown(first, field),
               "{}: field '{}' is {}, but {} has {}: such sets do not combine", set.path, field,
               shown(set, field), first.path, shown(first, field));
    }
    ES_CHECK(predicted_only(set) == predicted_only(first),
             "{}: {}, but {} is {}: predicted and measured costs do not combine", set.path,
             predicted_only(set) ? "predicted only" : "measured", first.path,
             predicted_only(first) ? "predicted only" : "measured");
    ES_CHECK(comm_measured(set) == comm_measured(first),
             "{}: comm is {}, but {} has {}: measured and modelled communication do not combine",
             set.path, shown(set, "/comm"), first.path, shown(first, "/comm"));
  }
}

// The algorithms asked for, each in every file; none asked: those in every
// file, in the first file's order.
std::vector<std::string> compared_algos(const std::vector<EvalSet>& sets,
                                        const std::vector<std::string>& asked) {
  check_no_repeated_algos(asked, "eval-report");
  std::vector<std::string> algos = asked.empty() ? header_algos(sets.front()) : asked;
  for (const EvalSet& set : sets) {
    const std::vector<std::string> has = header_algos(set);
    const auto missing = [&](const std::string& a) {
      return std::find(has.begin(), has.end(), a) == has.end();
    };
    if (asked.empty()) {
      const std::vector<std::string> before = algos;
      std::erase_if(algos, missing);
      ES_CHECK(!algos.empty(), "{}: none of the algorithms of the files before it ({}) is in it "
               "(it has {})",
               set.path, fmt::join(before, ","), fmt::join(has, ","));
    } else if (const auto it = std::find_if(algos.begin(), algos.end(), missing);
               it != algos.end()) {
      ES_THROW("{}: no algorithm '{}' (it has {})", set.path, *it, fmt::join(has, ","));
    }
  }
  return algos;
}

// What combines but may mislead: the same tasks twice, another model,
// machine or number of passes, sets that add nothing.
std::vector<std::string> notes_on(const CombinedEval& c) {
  std::vector<std::string> notes;
  const EvalSet& first = c.sets.front();
  for (size_t i = 0; i < c.sets.size(); ++i) {
    const EvalSet& s = c.sets[i];
    for (size_t j = 0; j < i; ++j) {
      if (s.header.contains("tasks_crc32") &&
          shown(s, "/tasks_crc32") == shown(c.sets[j], "/tasks_crc32") &&
          shown(s, "/pool") == shown(c.sets[j], "/pool")) {
        notes.push_back(fmt::format("{} and {} evaluate the same tasks of the same pool: a rerun, "
                                    "counted as a set of its own",
                                    c.sets[j].path, s.path));
      }
    }
    for (const char* field : {"/cost_model", "/model_dir", "/executor", "/machine/cpu",
                              "/comm_passes", "/compute_passes", "/verify_candidates",
                              "/verify_rounds", "/verify_leaders"}) {
      if (i > 0 && shown(s, field) != shown(first, field)) {
        notes.push_back(fmt::format("{}: field '{}' is {}, {} has {}", s.path, field,
                                    shown(s, field), first.path, shown(first, field)));
      }
    }
    if (c.per_set[i].tasks == 0) {
      notes.push_back(fmt::format("{}: no task that every algorithm planned: it adds nothing",
                                  s.path));
    }
  }
  return notes;
}

// `against`'s index in `algos` (-1 for none).
int against_index(const std::vector<std::string>& algos, const std::string& against) {
  if (against.empty()) return -1;
  const auto it = std::find(algos.begin(), algos.end(), against);
  ES_CHECK(it != algos.end(), "--against {}: not among the algorithms compared ({})", against,
           fmt::join(algos, ","));
  return static_cast<int>(it - algos.begin());
}

// Each algorithm's mean over the reference's mean on the same tasks (all 0
// without a reference).
std::vector<double> ratios_to(const EvalSummary& s, int reference) {
  std::vector<double> ratios(s.algos.size(), 0.0);
  if (reference < 0) return ratios;
  for (size_t a = 0; a < ratios.size(); ++a) {
    ratios[a] = s.score_ms(s.algos[a]) / s.score_ms(s.algos[reference]);
  }
  return ratios;
}

}  // namespace

EvalSet load_eval_set(const std::string& path) {
  EvalSet set{path, json(), {}};
  set.records = RecordFile::read_all(path, &set.header, nullptr);
  const json format = set.header.value("format", json());
  ES_CHECK(format == "embshard-eval",
           "{}: not an eval record file (its header's format is {}, expected \"embshard-eval\")",
           path, json_shown(format));
  ES_CHECK(json_field(set.header, "/devices", JsonKind::kCount, path).get<int64_t>() >= 1,
           "{}: field '/devices' is 0, expected at least 1", path);
  json_field(set.header, "/algos", JsonKind::kStrings, path);
  json_field(set.header, "/comm", JsonKind::kString, path);
  ES_CHECK(!set.header.contains("predict_only") || set.header.at("predict_only").is_boolean(),
           "{}: field '/predict_only' is {}, expected true or false", path,
           json_shown(set.header.at("predict_only")));
  return set;
}

CombinedEval combine_eval(const std::vector<std::string>& paths,
                          const std::vector<std::string>& algos, const std::string& against) {
  ES_CHECK(!paths.empty(), "no eval record file to combine");
  CombinedEval c;
  for (const std::string& path : paths) c.sets.push_back(load_eval_set(path));
  check_comparable(c.sets);
  c.algos = compared_algos(c.sets, algos);
  c.against = against;
  const int fixed = against_index(c.algos, against);
  c.devices = c.sets.front().header.at("devices").get<int>();
  c.comm_source = c.sets.front().header.at("comm").get<std::string>();
  std::vector<json> all;
  for (const EvalSet& set : c.sets) {
    const EvalSummary& s = c.per_set.emplace_back(summarize_eval(set.records, c.algos, set.path));
    c.set_reference.push_back(s.tasks == 0 ? -1 : fixed >= 0 ? fixed : s.best_baseline);
    c.set_ratio.push_back(ratios_to(s, c.set_reference.back()));
    c.sets_counted += s.tasks > 0 ? 1 : 0;
    all.insert(all.end(), set.records.begin(), set.records.end());
  }
  // The files were each read above: a record that fails here failed there.
  c.pooled = summarize_eval(all, c.algos);
  c.notes = notes_on(c);
  ES_CHECK(c.pooled.tasks == 0 || fixed >= 0 || c.pooled.best_baseline >= 0,
           "no baseline among the algorithms compared ({}): name one to divide by with "
           "--against ALGO",
           fmt::join(c.algos, ","));
  c.pooled_reference = c.pooled.tasks == 0 ? -1 : fixed >= 0 ? fixed : c.pooled.best_baseline;
  c.pooled_ratio = ratios_to(c.pooled, c.pooled_reference);
  c.set_mean.assign(c.algos.size(), MeanInterval{});
  for (size_t a = 0; a < c.algos.size() && c.sets_counted > 0; ++a) {
    std::vector<double> ratios;
    for (size_t i = 0; i < c.sets.size(); ++i) {
      if (c.set_reference[i] >= 0) ratios.push_back(c.set_ratio[i][a]);
    }
    const double m = mean(ratios);
    c.set_mean[a] = ratios.size() >= 2 ? mean_confidence_interval(ratios, 0.95)
                                       : MeanInterval{m, m, m};
  }
  return c;
}

namespace {

std::string reference_name(const CombinedEval& c, int reference) {
  return reference >= 0 ? c.algos[reference] : "-";
}

std::string interval(const CombinedEval& c, const MeanInterval& m) {
  return c.sets_counted >= 2 ? fmt::format("{:.3f}-{:.3f}", m.low, m.high) : "-";
}

}  // namespace

std::string combined_eval_report(const CombinedEval& c) {
  std::vector<std::string> columns = {"set", "tasks",
                                      c.against.empty() ? "best baseline" : "x"};
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
  std::vector<std::string> interval_row = {
      fmt::format("95% CI over {}", count_of(c.sets_counted, "set")), "", ""};
  std::vector<std::string> pooled_row = {"pooled: every task", std::to_string(c.pooled.tasks),
                                         reference_name(c, c.pooled_reference)};
  for (size_t a = 0; a < c.algos.size(); ++a) {
    mean_row.push_back(ratio(c.set_mean[a].mean));
    interval_row.push_back(interval(c, c.set_mean[a]));
    pooled_row.push_back(ratio(c.pooled_ratio[a]));
  }
  table.add_row(mean_row);
  table.add_row(interval_row);
  table.add_row(pooled_row);
  std::string out = fmt::format(
      "{} ({} tasks, {} devices): each set's mean cost x its {}; the mean of the sets' ratios "
      "with its 95% interval over the sets (Student's t); pooled: the means over every task x "
      "the pooled {}'s (a set of dearer tasks weighs more)\n{}",
      count_of(static_cast<int64_t>(c.sets.size()), "set"), c.pooled.tasks, c.devices,
      c.against.empty() ? "own best baseline's" : c.against + "'s",
      c.against.empty() ? "best baseline" : c.against, table.render());
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
  json means = json::object();
  json pooled = eval_summary_json(c.pooled, c.comm_source);
  pooled["reference"] = name(c.pooled_reference);
  for (size_t a = 0; a < c.algos.size(); ++a) {
    const MeanInterval& m = c.set_mean[a];
    means[c.algos[a]] = {
        {"ratio", figure(m.mean)},
        {"ci95", c.sets_counted >= 2 ? json::array({m.low, m.high}) : json()}};
    pooled["algorithms"][c.algos[a]]["ratio"] = figure(c.pooled_ratio[a]);
  }
  return {{"against", c.against.empty() ? json() : json(c.against)},
          {"devices", c.devices},
          {"sets_counted", c.sets_counted},
          {"notes", c.notes},
          {"sets", sets},
          {"mean_of_sets", means},
          {"pooled", pooled}};
}

namespace {

// The ratio axis of combined_eval_svg: every ratio and interval shown, and 1
// (the reference), in ticks a round step apart (1, 2, 2.5 or 5 times a
// power of ten, at least 0.05), at most about ten whatever the range.
struct RatioAxis {
  double lo = 1, hi = 1, step = 0.05;
  int ticks = 0;
};

RatioAxis ratio_axis(const CombinedEval& c) {
  double lo = 1, hi = 1;
  for (size_t a = 0; a < c.algos.size(); ++a) {
    for (const std::vector<double>& ratios : c.set_ratio) {
      if (ratios[a] > 0) lo = std::min(lo, ratios[a]), hi = std::max(hi, ratios[a]);
    }
    if (c.set_mean[a].mean > 0) {
      lo = std::min(lo, c.set_mean[a].low), hi = std::max(hi, c.set_mean[a].high);
    }
  }
  const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(hi - lo, 0.5) / 10)));
  double step = 10 * magnitude;
  for (const double m : {1.0, 2.0, 2.5, 5.0}) {
    if ((hi - lo) / (m * magnitude) <= 10) {
      step = m * magnitude;
      break;
    }
  }
  RatioAxis axis;
  axis.step = std::max(step, 0.05);
  axis.lo = std::max(0.0, std::floor(lo / axis.step - 0.5) * axis.step);
  axis.hi = std::ceil(hi / axis.step + 0.5) * axis.step;
  axis.ticks = static_cast<int>(std::lround((axis.hi - axis.lo) / axis.step));
  return axis;
}

}  // namespace

std::string combined_eval_svg(const CombinedEval& c) {
  const std::string reference = c.against.empty() ? "the best baseline" : c.against;
  const RatioAxis axis = ratio_axis(c);
  const double lo = axis.lo, hi = axis.hi, step = axis.step;
  const int ticks = axis.ticks;
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
      "tasks, {} devices)</text>\n<text x=\"10\" y=\"40\" fill=\"#555\">dot: a set's ratio; "
      "bar: the mean of the sets' ratios; whisker: its 95% interval over the sets (Student's "
      "t)</text>\n",
      width, height, c.pooled.predicted_only ? "Predicted" : "Measured", xml_escaped(reference),
      count_of(static_cast<int64_t>(c.sets.size()), "set"), c.pooled.tasks, c.devices);
  for (int k = 0; k <= ticks; ++k) {
    const double t = lo + k * step;
    const bool one = std::abs(t - 1) < 1e-9;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.0f}\" stroke=\"{3}\" "
        "stroke-dasharray=\"{4}\"/>\n<text x=\"{0:.1f}\" y=\"{5:.0f}\" "
        "text-anchor=\"middle\" fill=\"#555\">{6:.2f}</text>\n",
        x_of(t), kTop - 8, height - 38, one ? "#333" : "#ddd", one ? "4,3" : "none",
        height - 24, t);
  }
  double y = kTop;
  for (size_t a = 0; a < c.algos.size(); ++a) {
    const double mid = y + kRow / 2;
    const std::string colour = is_baseline(c.algos[a]) ? "#1f77b4" : "#d62728";
    const MeanInterval& m = c.set_mean[a];
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8,
                       mid + 4, xml_escaped(c.algos[a]));
    if (c.sets_counted >= 2) {
      svg += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
                         "stroke=\"{}\" stroke-width=\"2\"/>\n",
                         x_of(m.low), x_of(m.high), mid, mid, colour);
    }
    if (m.mean > 0) {
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"4\" height=\"{:.0f}\" "
                         "fill=\"{}\"/>\n<text x=\"{:.1f}\" y=\"{:.1f}\">x{:.3f}{}</text>\n",
                         x_of(m.mean) - 2, mid - kRow * 0.35, kRow * 0.7, colour,
                         left + kPlot + 10, mid + 4, m.mean,
                         c.sets_counted >= 2 ? " [" + interval(c, m) + "]" : "");
    }
    for (size_t i = 0; i < c.sets.size(); ++i) {
      if (c.set_ratio[i][a] <= 0) continue;
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\" "
                         "fill-opacity=\"0.45\"><title>{}: {:.3f}</title></circle>\n",
                         x_of(c.set_ratio[i][a]), mid, colour, xml_escaped(c.sets[i].path),
                         c.set_ratio[i][a]);
    }
    y += kRow;
  }
  return svg + "</svg>\n";
}

}  // namespace embshard
