// Accuracy figures (MAPE, p90 APE, Kendall's tau), scatter plots, reports.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "embshard/cost/accuracy_report.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

using nlohmann::json;

// Log-axis range covering [lo, hi] on whole decades (at least one decade).
std::pair<double, double> decade_range(double lo, double hi) {
  double a = std::floor(std::log10(lo)), b = std::ceil(std::log10(hi));
  if (b <= a) b = a + 1;
  return {a, b};
}

}  // namespace

json to_json(const AccuracyFigures& f) {
  return {{"count", f.count},
          {"mape_pct", f.mape_pct},
          {"p90_ape_pct", f.p90_ape_pct},
          {"kendall_tau", f.kendall_tau},
          {"median_error_pct", f.median_error_pct}};
}

std::string scatter_svg(const Comparison& c) {
  const AccuracyFigures f = accuracy(c.predicted, c.measured);
  constexpr double W = 480, H = 480, L = 70, R = 20, T = 50, B = 60;
  double lo = 1e300, hi = 0;
  for (size_t i = 0; i < c.measured.size(); ++i) {
    for (double v : {c.predicted[i], c.measured[i]}) {
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (hi <= 0) lo = 0.1, hi = 1;
  // Plain variables, not a structured binding: clang 14 (the fuzz build) cannot
  // capture a binding in a lambda.
  const auto decades = decade_range(lo, hi);
  const double d0 = decades.first, d1 = decades.second;
  const auto px = [&](double v) { return L + (std::log10(v) - d0) / (d1 - d0) * (W - L - R); };
  const auto py = [&](double v) { return H - B - (std::log10(v) - d0) / (d1 - d0) * (H - T - B); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      W, H);
  s += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
                   W / 2, xml_escaped(c.title));
  s += fmt::format(
      "<text x=\"{}\" y=\"40\" text-anchor=\"middle\">MAPE {:.2f}%, p90 {:.2f}%, "
      "tau {:.3f}, n = {}</text>\n",
      W / 2, f.mape_pct, f.p90_ape_pct, f.kendall_tau, f.count);
  for (int d = static_cast<int>(d0); d <= static_cast<int>(d1); ++d) {  // decade grid + labels
    const double v = std::pow(10.0, d);
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<line x1=\"{3}\" y1=\"{4:.1f}\" x2=\"{5}\" y2=\"{4:.1f}\" stroke=\"#ddd\"/>\n",
        px(v), T, H - B, L, py(v), W - R);
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
        px(v), H - B + 16, v, L - 6, py(v) + 4, v);
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"black\"/>\n",
      L, T, W - L - R, H - T - B);
  const double a = std::pow(10.0, d0), b = std::pow(10.0, d1);
  s += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"red\" "
      "stroke-dasharray=\"4 3\"/>\n",
      px(a), py(a), px(b), py(b));
  for (size_t i = 0; i < c.measured.size(); ++i) {
    if (c.predicted[i] <= 0 || c.measured[i] <= 0) continue;
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"#1f77b4\" "
        "fill-opacity=\"0.6\"/>\n",
        px(c.measured[i]), py(c.predicted[i]));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">measured ms (log)</text>\n",
                   (L + W - R) / 2, H - 20);
  s += fmt::format(
      "<text x=\"18\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0})\">"
      "predicted ms (log)</text>\n</svg>\n",
      (T + H - B) / 2);
  return s;
}

json write_accuracy_report(const std::string& dir, const std::string& heading,
                           const std::vector<Comparison>& comparisons,
                           const std::vector<std::string>& notes) {
  std::filesystem::create_directories(dir);
  json figures = json::object();
  std::string md = "# " + heading + "\n\n";
  md += "| split | n | MAPE % | p90 APE % | Kendall tau | plot |\n|---|---:|---:|---:|---:|---|\n";
  for (const Comparison& c : comparisons) {
    const AccuracyFigures f = accuracy(c.predicted, c.measured);
    figures[c.name] = to_json(f);
    figures[c.name]["title"] = c.title;
    if (f.count == 0) {
      md += fmt::format("| {} | 0 | - | - | - | - |\n", c.title);
      continue;
    }
    std::string plot = "-";
    if (c.plot) {
      write_file_atomic((std::filesystem::path(dir) / (c.name + ".svg")).string(), scatter_svg(c));
      plot = fmt::format("[{}.svg]({}.svg)", c.name, c.name);
    }
    md += fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.3f} | {} |\n", c.title, f.count,
                      f.mape_pct, f.p90_ape_pct, f.kendall_tau, plot);
  }
  if (!notes.empty()) {
    md += "\n";
    for (const std::string& n : notes) md += "- " + n + "\n";
  }
  write_file_atomic((std::filesystem::path(dir) / "report.md").string(), md);
  write_file_atomic(
      (std::filesystem::path(dir) / "report.json").string(),
      json{{"heading", heading}, {"figures", figures}, {"notes", notes}}.dump(2) + "\n");
  return figures;
}

}  // namespace embshard
