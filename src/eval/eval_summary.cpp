// Summaries of evaluation records: means, ratios to the best baseline, where
// the cost goes, as a report, JSON and an SVG chart.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/statistics.h"
#include "embshard/util/text_table.h"
#include "embshard/util/units.h"

namespace embshard {

using nlohmann::json;

bool is_baseline(const std::string& spec) {
  const std::string name = spec.substr(0, spec.find_first_of("@:"));
  return name != "neuroshard" && name != "dreamshard" && name != "autoshard" &&
         verified_base(name).empty();
}

namespace {

// "<source>: " where a source is named, else "".
std::string prefix(const std::string& source) { return source.empty() ? "" : source + ": "; }

// An algorithm's figure in record `k`: positive and of a step's size (a
// nanosecond to 11.6 days: a figure outside is no measurement, and would
// overflow the ratios and the charts' axes), else an error naming the record.
double checked_score(const json& x, const char* key, const json& r, size_t k,
                     const std::string& algo, const std::string& source) {
  const double score = x.at(key).get<double>();
  ES_CHECK(std::isfinite(score) && score > 0,
           "{}eval record {} (task {}): {} of '{}' is {}, a cost must be positive", prefix(source),
           k + 1, r.value("task", json()).dump(), key, algo, score);
  ES_CHECK(score >= 1e-6 && score <= 1e9,
           "{}eval record {} (task {}): {} of '{}' is {}: outside 1e-6 to 1e9 ms a step, "
           "not a cost that was measured or predicted",
           prefix(source), k + 1, r.value("task", json()).dump(), key, algo, score);
  return score;
}

// One algorithm's record `x` of a counted task into its sums (divided by the
// task count in finish_summary); clears the result's flags of figures the
// record lacks.
void add_to_summary(AlgoSummary& s, EvalSummary& result, const json& x, double score, double best,
                    bool measured, const json& r, const std::string& source) {
  const double predicted = x.at("predicted_ms").get<double>();
  s.mean_measured_ms += measured ? score : 0;
  s.mean_predicted_ms += predicted;
  s.tasks_won += score <= best * (1 + 1e-9) ? 1 : 0;
  s.mean_gap_to_bound += predicted / x.at("bound_ms").get<double>() - 1;
  s.prediction_mape_pct += measured ? 100 * std::abs(predicted - score) / score : 0;
  result.raw_clock = result.raw_clock && x.contains("measured_raw_ms");
  s.mean_raw_ms += x.contains("measured_raw_ms") ? x.at("measured_raw_ms").get<double>() : 0;
  result.first_compute = result.first_compute && x.contains("measured_first_compute_ms");
  s.mean_first_compute_ms += x.value("measured_first_compute_ms", 0.0);
  if (measured && x.contains("verification") && x.at("verification").contains("chosen_passes_ms")) {
    const json& v = x.at("verification");
    std::vector<double> figures = {
        fastest_half_mean(v.at("chosen_passes_ms").get<std::vector<double>>())};
    if (v.contains("chosen_fresh_ms")) {
      for (double ms : v.at("chosen_fresh_ms").get<std::vector<double>>()) figures.push_back(ms);
    }
    s.fallback_pct.push_back(100 * (score / median(figures) - 1));
  }
  if (const json::json_pointer tie("/verification/runner_up/tie"); x.contains(tie)) {
    ++s.choices_judged;
    s.choice_ties += x.at(tie).get<bool>() ? 1 : 0;
  }
  if (x.contains("device_compute_ms")) {
    const auto ms = x.at("device_compute_ms").at("measured").get<std::vector<double>>();
    ES_CHECK(!ms.empty(), "{}no device in device_compute_ms.measured of '{}' (task {})",
             prefix(source), s.name, r.value("task", json()).dump());
    s.mean_slowest_compute_ms += *std::max_element(ms.begin(), ms.end());
    s.mean_device_compute_ms += mean(ms);
  } else {
    result.device_compute = false;
  }
}

// The sums into means over the `planned` tasks, and every algorithm's ratio
// to the best baseline (with its interval from the tasks' `scores`).
void finish_summary(EvalSummary& result, const std::vector<std::vector<double>>& scores,
                    int planned) {
  std::vector<AlgoSummary>& summary = result.algos;
  const double n = planned;
  const auto score = [&](const AlgoSummary& s) { return result.score_ms(s); };
  double best_baseline = INFINITY, best_raw_baseline = INFINITY, best_first_baseline = INFINITY;
  size_t best = 0;
  for (size_t a = 0; a < summary.size(); ++a) {
    AlgoSummary& s = summary[a];
    s.mean_measured_ms /= n;
    s.mean_predicted_ms /= n;
    s.mean_gap_to_bound /= n;
    s.prediction_mape_pct /= n;
    s.mean_raw_ms = result.raw_clock ? s.mean_raw_ms / n : 0;
    s.mean_first_compute_ms = result.first_compute ? s.mean_first_compute_ms / n : 0;
    s.mean_slowest_compute_ms = result.device_compute ? s.mean_slowest_compute_ms / n : 0;
    s.mean_device_compute_ms = result.device_compute ? s.mean_device_compute_ms / n : 0;
    if (is_baseline(s.name)) {
      if (score(s) < best_baseline) best = a;
      best_baseline = std::min(best_baseline, score(s));
      best_raw_baseline = std::min(best_raw_baseline, s.mean_raw_ms);
      best_first_baseline = std::min(best_first_baseline, s.mean_first_compute_ms);
    }
  }
  if (std::isfinite(best_baseline)) result.best_baseline = static_cast<int>(best);
  for (size_t a = 0; a < summary.size(); ++a) {
    AlgoSummary& s = summary[a];
    s.ratio_to_best_baseline = std::isfinite(best_baseline) ? score(s) / best_baseline : 0;
    if (std::isfinite(best_baseline) && planned >= 2) {
      const RatioInterval ci = bootstrap_ratio_interval(scores[a], scores[best], 0.95);
      s.ratio_ci_low = ci.low;
      s.ratio_ci_high = ci.high;
    }
    s.raw_ratio_to_best_baseline = result.raw_clock && std::isfinite(best_raw_baseline)
                                       ? s.mean_raw_ms / best_raw_baseline
                                       : 0;
    s.first_compute_ratio_to_best_baseline =
        result.first_compute && std::isfinite(best_first_baseline)
            ? s.mean_first_compute_ms / best_first_baseline
            : 0;
  }
}

}  // namespace

EvalSummary summarize_eval(const std::vector<json>& records,
                           const std::vector<std::string>& algos, const std::string& source) {
  EvalSummary result;
  std::vector<AlgoSummary>& summary = result.algos;
  summary.resize(algos.size());
  for (size_t a = 0; a < algos.size(); ++a) summary[a].name = algos[a];
  int planned = 0;
  result.raw_clock = true;
  result.first_compute = true;
  result.device_compute = true;
  std::vector<std::vector<double>> scores(algos.size());  // per algorithm, per task counted
  for (size_t k = 0; k < records.size(); ++k) {
    const json& r = records[k];
    if (r.contains("infeasible")) continue;
    // at(), never [] on a const record: a field missing from an edited file
    // is an error naming it, not a read past the end.
    try {
      // Means compare algorithms on the same tasks: a task where any of them
      // found no plan is counted as that algorithm's failure and left out.
      bool any_failed = false;
      for (size_t a = 0; a < algos.size(); ++a) {
        if (r.at("algos").at(algos[a]).contains("error")) {
          ++summary[a].failed;
          any_failed = true;
        }
      }
      if (any_failed) continue;
      ++planned;
      // The figure algorithms are ranked by: measured, or with --predict-only
      // (no measured_ms) predicted.
      const bool measured = r.at("algos").at(algos.front()).contains("measured_ms");
      result.predicted_only = !measured;
      const char* const key = measured ? "measured_ms" : "predicted_ms";
      double best = INFINITY;
      for (const std::string& a : algos) {
        best = std::min(best, r.at("algos").at(a).at(key).get<double>());
      }
      for (size_t a = 0; a < algos.size(); ++a) {
        const json& x = r.at("algos").at(algos[a]);
        const double score = checked_score(x, key, r, k, algos[a], source);
        scores[a].push_back(score);
        add_to_summary(summary[a], result, x, score, best, measured, r, source);
      }
    } catch (const json::exception& e) {
      ES_THROW("{}eval record {} (task {}): {}", prefix(source), k + 1,
               r.is_object() ? r.value("task", json()).dump() : "none", e.what());
    }
  }
  result.tasks = planned;
  result.left_out = static_cast<int>(records.size()) - planned;
  result.raw_clock = result.raw_clock && planned > 0;
  result.first_compute = result.first_compute && planned > 0;
  result.device_compute = result.device_compute && planned > 0 && !result.predicted_only;
  if (planned > 0) finish_summary(result, scores, planned);
  return result;
}

json eval_summary_json(const EvalSummary& summary, const std::string& comm_source) {
  // What was not measured (--predict-only, no task planned, no baseline
  // run) is null, not a zero that reads like a figure.
  const bool none = summary.tasks == 0;
  const auto figure = [](bool known, double value) { return known ? json(value) : json(nullptr); };
  json algos = json::object();
  for (const AlgoSummary& s : summary.algos) {
    const bool measured = !none && !summary.predicted_only;
    algos[s.name] = {{"mean_measured_ms", figure(measured, s.mean_measured_ms)},
                     {"tasks_failed", s.failed},
                     {"mean_predicted_ms", figure(!none, s.mean_predicted_ms)},
                     {"ratio_to_best_baseline", figure(s.ratio_to_best_baseline > 0,
                                                       s.ratio_to_best_baseline)},
                     {"ratio_ci95", s.ratio_ci_high > 0
                                        ? json::array({s.ratio_ci_low, s.ratio_ci_high})
                                        : json(nullptr)},
                     {"tasks_won", s.tasks_won},
                     {"mean_gap_to_bound", figure(!none, s.mean_gap_to_bound)},
                     {"prediction_mape_pct", figure(measured, s.prediction_mape_pct)},
                     {"mean_raw_ms", figure(summary.raw_clock, s.mean_raw_ms)},
                     {"raw_ratio_to_best_baseline", figure(s.raw_ratio_to_best_baseline > 0,
                                                           s.raw_ratio_to_best_baseline)},
                     {"mean_first_compute_ms",
                      figure(summary.first_compute, s.mean_first_compute_ms)},
                     {"first_compute_ratio_to_best_baseline",
                      figure(s.first_compute_ratio_to_best_baseline > 0,
                             s.first_compute_ratio_to_best_baseline)},
                     {"mean_slowest_compute_ms",
                      figure(summary.device_compute, s.mean_slowest_compute_ms)},
                     {"mean_device_compute_ms",
                      figure(summary.device_compute, s.mean_device_compute_ms)}};
    if (!s.fallback_pct.empty()) {
      algos[s.name]["verification_fallback_pct"] = {{"mean", mean(s.fallback_pct)},
                                                    {"median", median(s.fallback_pct)},
                                                    {"tasks", s.fallback_pct.size()}};
    }
    if (s.choices_judged > 0) {
      algos[s.name]["verification_ties"] = {{"ties", s.choice_ties},
                                            {"tasks", s.choices_judged}};
    }
  }
  return {{"tasks", summary.tasks},
          {"communication", comm_source},
          {"predicted_only", summary.predicted_only},
          {"algorithms", algos}};
}

namespace {

// The second table of the report: each algorithm's measured cost split into
// its slowest device's compute and the rest, beside the devices' mean
// compute ("" where the records do not hold the devices' compute).
std::string where_the_cost_goes(const EvalSummary& summary) {
  if (!summary.device_compute) return "";
  // The ratios to the best baseline are all set or all 0 (no baseline run).
  const bool ratios = summary.algos.front().ratio_to_best_baseline > 0;
  std::vector<std::string> columns = {"algorithm", "measured ms", "slowest compute",
                                      "mean compute", "the rest", "balanced"};
  if (ratios) columns.push_back("balanced x best baseline");
  TextTable table(columns);
  for (const AlgoSummary& s : summary.algos) {
    std::vector<std::string> row = {
        s.name, fmt::format("{:.3f}", s.mean_measured_ms),
        fmt::format("{:.3f}", s.mean_slowest_compute_ms),
        fmt::format("{:.3f}", s.mean_device_compute_ms), fmt::format("{:.3f}", s.rest_ms()),
        fmt::format("{:.3f}", s.balanced_ms())};
    if (ratios) {
      row.push_back(fmt::format(
          "{:.3f}", s.balanced_ms() / s.mean_measured_ms * s.ratio_to_best_baseline));
    }
    table.add_row(row);
  }
  return fmt::format("\nwhere the cost goes (means over the tasks, ms): the slowest device's "
                     "compute, the devices' mean compute, the rest of the cost (communication and "
                     "waits); balanced = mean compute + the rest: the plan with its compute "
                     "spread evenly over the devices\n{}",
                     table.render());
}

// A line per verified algorithm: how far its chosen plan measured from its
// figure in verification.
std::string fallbacks(const EvalSummary& summary) {
  std::string out;
  for (const AlgoSummary& s : summary.algos) {
    if (s.fallback_pct.empty()) continue;
    out += fmt::format("{}: the chosen plan measured {:+.1f}% (median {:+.1f}%, over {}) against "
                       "its figure in verification",
                       s.name, mean(s.fallback_pct), median(s.fallback_pct),
                       count_of(static_cast<int64_t>(s.fallback_pct.size()), "task"));
    if (s.choices_judged > 0) {
      out += fmt::format("; its lead over the runner-up within a leader's own span (a tie) on {} "
                         "of {}",
                         s.choice_ties, count_of(s.choices_judged, "task"));
    }
    out += "\n";
  }
  return out.empty() ? out : "\n" + out;
}

}  // namespace

std::string eval_report(const EvalSummary& summary, const std::string& comm_source) {
  const int tasks = summary.tasks;
  if (tasks == 0) {
    return fmt::format("no task was planned by every algorithm ({} left out: did not fit, or an "
                       "algorithm found no plan): nothing to compare\n",
                       summary.left_out);
  }
  // No baseline among the algorithms: no ratio to show.
  const auto shown = [](double ratio) {
    return ratio > 0 ? fmt::format("{:.3f}", ratio) : std::string("-");
  };
  const auto ratio = [&](const AlgoSummary& s) { return shown(s.ratio_to_best_baseline); };
  const auto interval = [](const AlgoSummary& s) {
    return s.ratio_ci_high > 0 ? fmt::format("{:.3f}-{:.3f}", s.ratio_ci_low, s.ratio_ci_high)
                               : std::string("-");
  };
  const std::string interval_note =
      "; 95% CI: the ratio's interval over the tasks (bootstrap), not run-to-run drift";
  if (summary.predicted_only) {
    TextTable table({"algorithm", "mean predicted ms", "x best baseline", "95% CI", "tasks won",
                     "no plan", "gap to bound %"});
    for (const AlgoSummary& s : summary.algos) {
      table.add_row({s.name, fmt::format("{:.3f}", s.mean_predicted_ms), ratio(s), interval(s),
                     fmt::format("{}/{}", s.tasks_won, tasks), std::to_string(s.failed),
                     fmt::format("{:.1f}", 100 * s.mean_gap_to_bound)});
    }
    return fmt::format("{} tasks; predicted only (nothing executed): every figure is the cost "
                       "model's; communication: {}{}\n{}",
                       tasks, comm_source, interval_note, table.render());
  }
  std::vector<std::string> columns = {"algorithm",     "mean measured ms", "mean predicted ms",
                                      "x best baseline", "95% CI",           "tasks won",
                                      "no plan",         "pred. error %",    "gap to bound %"};
  if (summary.raw_clock) columns.insert(columns.end(), {"raw clock ms", "x best (raw)"});
  if (summary.first_compute) columns.push_back("x best (1st compute)");
  TextTable table(columns);
  for (const AlgoSummary& s : summary.algos) {
    std::vector<std::string> row = {s.name,
                                    fmt::format("{:.3f}", s.mean_measured_ms),
                                    fmt::format("{:.3f}", s.mean_predicted_ms),
                                    ratio(s),
                                    interval(s),
                                    fmt::format("{}/{}", s.tasks_won, tasks),
                                    std::to_string(s.failed),
                                    fmt::format("{:.1f}", s.prediction_mape_pct),
                                    fmt::format("{:.1f}", 100 * s.mean_gap_to_bound)};
    if (summary.raw_clock) {
      row.insert(row.end(), {fmt::format("{:.3f}", s.mean_raw_ms),
                             shown(s.raw_ratio_to_best_baseline)});
    }
    if (summary.first_compute) row.push_back(shown(s.first_compute_ratio_to_best_baseline));
    table.add_row(row);
  }
  return fmt::format("{} tasks; measured = every device's fused forward+backward+update on the "
                     "executor; communication: {}{}{}{}\n{}{}{}",
                     tasks, comm_source, interval_note,
                     summary.raw_clock ? "; raw clock = the wall clock's medians (compute from the "
                                         "same runs, all-to-alls timed again), drift not "
                                         "cancelled"
                                       : "",
                     summary.first_compute
                         ? "; compute = each device's median of its passes (1st compute: its "
                           "first measurement alone)"
                         : "",
                     table.render(), where_the_cost_goes(summary), fallbacks(summary));
}

std::string eval_svg(const EvalSummary& result, int devices) {
  const std::vector<AlgoSummary>& summary = result.algos;
  const int tasks = result.tasks;
  const bool predicted = result.predicted_only;  // bars predicted, no ticks
  auto bar = [&](const AlgoSummary& s) { return predicted ? s.mean_predicted_ms : s.mean_measured_ms; };
  constexpr double kBar = 28, kTop = 50;
  // Room for the longest name on the left (about 7 px a character at 12 px),
  // and for the labels on the right.
  size_t longest = 0;
  for (const AlgoSummary& s : summary) longest = std::max(longest, s.name.size());
  const double left = std::max(150.0, 16 + 7.0 * static_cast<double>(longest));
  const double label_w = result.raw_clock ? 310 : 230;
  const double width = 340 + left + label_w;
  double top = 0;
  for (const AlgoSummary& s : summary) top = std::max({top, bar(s), s.mean_predicted_ms});
  const double scale = top > 0 ? (width - left - label_w) / top : 0;
  const double height = kTop + summary.size() * (kBar + 12) + 40;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"10\" y=\"22\" font-size=\"15\">Mean {} cost per "
      "algorithm ({} tasks, {} devices)</text>\n<text x=\"10\" y=\"40\" fill=\"#555\">{}</text>\n",
      width, height, predicted ? "predicted" : "measured", tasks, devices,
      predicted ? "bar: predicted by the cost model (nothing executed); [a-b]: 95% interval "
                  "of the ratio over the tasks"
      : result.raw_clock ? "bar: measured (executor); tick: predicted by the cost model; [a-b]: "
                           "95% interval of the ratio over the tasks; raw: x best baseline on "
                           "the wall clock"
                         : "bar: measured (executor); tick: predicted by the cost model; [a-b]: "
                           "95% interval of the ratio over the tasks");
  if (result.device_compute) {
    svg += fmt::format("<text x=\"10\" y=\"{}\" fill=\"#555\">pale end of a bar: the cost "
                       "beyond the slowest device's compute (communication and waits)</text>\n",
                       height - 14);
  }
  double y = kTop;
  for (const AlgoSummary& s : summary) {
    const bool ours = !is_baseline(s.name);
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n<rect x=\"{}\" y=\"{}\" "
        "width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n",
        left - 8, y + kBar * 0.65, xml_escaped(s.name), left, y, bar(s) * scale, kBar,
        ours ? "#d62728" : "#1f77b4");
    if (result.device_compute) {  // the rest, paled
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"white\" "
          "fill-opacity=\"0.55\"><title>{}: slowest device's compute {:.3f} ms, the rest "
          "{:.3f} ms</title></rect>\n",
          left + s.mean_slowest_compute_ms * scale, y, std::max(0.0, s.rest_ms()) * scale, kBar,
          xml_escaped(s.name), s.mean_slowest_compute_ms, s.rest_ms());
    }
    if (!predicted) {
      svg += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" stroke=\"black\" "
          "stroke-width=\"2\"/>\n",
          left + s.mean_predicted_ms * scale, left + s.mean_predicted_ms * scale, y - 3,
          y + kBar + 3);
    }
    const std::string raw =
        result.raw_clock ? fmt::format("; raw x{:.2f}", s.raw_ratio_to_best_baseline) : "";
    const std::string ci = s.ratio_ci_high > 0 ? fmt::format(" [{:.2f}-{:.2f}]", s.ratio_ci_low,
                                                             s.ratio_ci_high)
                                               : "";
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.2f} ms (x{:.2f}{}{})</text>\n",
                       left + std::max(bar(s), s.mean_predicted_ms) * scale + 6,
                       y + kBar * 0.65, bar(s), s.ratio_to_best_baseline, ci, raw);
    y += kBar + 12;
  }
  return svg + "</svg>\n";
}

}  // namespace embshard
