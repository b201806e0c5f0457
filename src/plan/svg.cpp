// The plan as a picture: per device, a stacked bar of predicted compute,
// forward and backward communication (ms), and a bar of memory use against
// capacity. Hand-written SVG: no plotting library, readable at any size.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "embshard/plan/report.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

constexpr int kLeft = 70, kTop = 60, kPlotHeight = 260, kMemHeight = 70, kGap = 40;
constexpr const char* kComputeColor = "#4878d0";
constexpr const char* kFwdColor = "#ee854a";
constexpr const char* kBwdColor = "#6acc64";
constexpr const char* kMemColor = "#956cb4";

std::string rect(double x, double y, double w, double h, const char* fill, const std::string& tip) {
  return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
                     "fill=\"{}\"><title>{}</title></rect>\n",
                     x, y, w, std::max(0.0, h), fill, tip);
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle",
                 int size = 12) {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\">{}</text>\n",
                     x, y, size, anchor, s);
}

std::string legend(double x, double y) {
  std::string out;
  const std::pair<const char*, const char*> items[] = {
      {kComputeColor, "compute"}, {kFwdColor, "fwd comm"}, {kBwdColor, "bwd comm"},
      {kMemColor, "memory used"}};
  for (const auto& [color, label] : items) {
    out += rect(x, y - 10, 12, 12, color, label);
    out += text(x + 16, y, label, "start");
    x += 110;
  }
  return out;
}

}  // namespace

std::string plan_svg(const PlanTask& task, const PlanResult& r) {
  const int n = task.num_devices();
  const double bar = std::clamp(600.0 / n, 6.0, 48.0);
  const double step = bar * 1.4;
  const int width = kLeft + static_cast<int>(step * n) + 40;
  const int height = kTop + kPlotHeight + kGap + kMemHeight + 60;
  double max_ms = std::max(r.bound.total_ms(), r.predicted.cost_ms);
  if (max_ms <= 0) max_ms = 1;
  const double scale = kPlotHeight / (max_ms * 1.05);
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      std::max(width, 560), height);
  s += text(kLeft, 22, fmt::format("{}: {} on {}, predicted {:.3f} ms, gap to bound {:.1f}%",
                                   r.algorithm, count_of(task.num_tables(), "table"),
                                   count_of(n, "device"), r.predicted.cost_ms,
                                   100 * r.gap()),
            "start", 14);
  s += text(10, height - 8, "cost model: " + r.cost_model + "; " + sharding_type_summary(task, r.plan),
            "start", 10);
  s += legend(kLeft, 44);
  const double base = kTop + kPlotHeight;
  s += text(kLeft - 8, kTop + 4, fmt::format("{:.2f} ms", max_ms * 1.05), "end", 11);
  s += text(kLeft - 8, base, "0", "end", 11);
  // The lower bound as a dashed line across the bars.
  const double lb_y = base - r.bound.total_ms() * scale;
  s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#444\" "
                   "stroke-dasharray=\"5,4\"/>\n",
                   kLeft, lb_y, kLeft + step * n, lb_y);
  s += text(kLeft + step * n + 2, lb_y + 4, "bound", "start", 10);
  const double mem_base = base + kGap + kMemHeight;
  for (int d = 0; d < n; ++d) {
    const DeviceCosts& c = r.predicted.devices[d];
    const double x = kLeft + d * step + (step - bar) / 2;
    double y = base;
    const std::pair<double, const char*> parts[] = {
        {c.compute_ms, kComputeColor}, {c.fwd_comm_ms, kFwdColor}, {c.bwd_comm_ms, kBwdColor}};
    const char* names[] = {"compute", "fwd comm", "bwd comm"};
    for (int k = 0; k < 3; ++k) {
      const double h = parts[k].first * scale;
      y -= h;
      s += rect(x, y, bar, h, parts[k].second,
                fmt::format("device {} {}: {:.3f} ms", d, names[k], parts[k].first));
    }
    if (d == r.predicted.critical_device) s += text(x + bar / 2, y - 4, "*", "middle", 14);
    const double frac = static_cast<double>(c.memory_bytes) / task.device_mem_bytes[d];
    s += rect(x, mem_base - kMemHeight, bar, kMemHeight, "#eeeeee", "capacity");
    s += rect(x, mem_base - frac * kMemHeight, bar, frac * kMemHeight, kMemColor,
              fmt::format("device {}: {:.3f} of {:.3f} GB ({:.0f}%)", d, c.memory_bytes / 1e9,
                          task.device_mem_bytes[d] / 1e9, 100 * frac));
    if (n <= 32 || d % (n / 16) == 0) s += text(x + bar / 2, mem_base + 14, std::to_string(d), "middle", 11);
  }
  s += text(kLeft - 8, mem_base - kMemHeight / 2, "memory", "end", 11);
  s += text(kLeft + step * n / 2, mem_base + 32, "device (* critical)", "middle", 12);
  s += "</svg>\n";
  return s;
}

}  // namespace embshard
