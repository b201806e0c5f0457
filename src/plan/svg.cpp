// The plan as a picture: per device, a stacked bar of predicted compute,
// forward and backward communication (ms), and a bar of memory use against
// capacity. Hand-written SVG: no plotting library, readable at any size.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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
                     x, y, size, anchor, xml_escaped(s));  // a model path is the user's
}

// Generous widths of sans-serif text, so that what is sized by them fits.
double text_width(const std::string& s, int size) { return 0.6 * size * s.size(); }

// `s` in lines of at most `chars` characters, broken at spaces.
std::vector<std::string> wrapped(const std::string& s, size_t chars) {
  std::vector<std::string> lines{""};
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(' ', start);
    if (end == std::string::npos) end = s.size();
    const std::string word = s.substr(start, end - start);
    if (!lines.back().empty() && lines.back().size() + 1 + word.size() > chars) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + word;
    start = end + 1;
  }
  return lines;
}

// A device's physical floor: a black line across its bar.
// Hosts of `t` over `n` device columns `step` wide: a line between each two
// down to `bottom`, and their numbers where a host is wide enough for one.
std::string host_marks(const Topology& t, int n, double step, double bottom) {
  std::string s;
  for (int h = 0; t.hierarchical(n) && h < t.num_hosts(n); ++h) {
    const double x = kLeft + h * t.devices_per_host * step;
    if (h > 0) {
      s += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\"/>\n", x, kTop,
          x, bottom);
    }
    if (t.devices_per_host * step >= 40) {
      s += text(x + 3, kTop + 10, fmt::format("host {}", h), "start", 9);
    }
  }
  return s;
}

std::string floor_mark(double x, double width, double y, int device, double floor_ms) {
  return fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
      "stroke=\"black\" stroke-width=\"2\"><title>device {} physical floor: "
      "{:.3f} ms</title></line>\n",
      x, y, x + width, y, device, floor_ms);
}

std::string legend(double x, double y, bool floors) {
  std::string out;
  const std::pair<const char*, const char*> items[] = {
      {kComputeColor, "compute"}, {kFwdColor, "fwd comm"}, {kBwdColor, "bwd comm"},
      {kMemColor, "memory used"}};
  for (const auto& [color, label] : items) {
    out += rect(x, y - 10, 12, 12, color, label);
    out += text(x + 16, y, label, "start");
    x += 110;
  }
  if (floors) {
    out += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
        "stroke=\"black\" stroke-width=\"2\"/>\n",
        x, y - 4, x + 12, y - 4);
    out += text(x + 16, y, "physical floor", "start");
  }
  return out;
}

}  // namespace

std::string plan_svg(const PlanTask& task, const PlanResult& r) {
  const int n = task.num_devices();
  // Up to 100 devices, bars of 6-48 px with gaps; past them, bars side by side
  // in about 1,000 px (at least 1 px each), so that 1,024 devices still fit a screen.
  const double bar = n <= 100 ? std::clamp(600.0 / n, 6.0, 48.0) : std::max(1.0, 1000.0 / n);
  const double step = n <= 100 ? bar * 1.4 : bar;
  const std::string title =
      fmt::format("{}: {} on {}, predicted {:.3f} ms, gap to bound {:.1f}%", r.algorithm,
                  count_of(task.num_tables(), "table"), count_of(n, "device"),
                  r.predicted.cost_ms, 100 * r.gap());
  const int width = std::max({kLeft + static_cast<int>(step * n) + 40, 640,
                              kLeft + static_cast<int>(text_width(title, 14)) + 10});
  // The caption under the plot, wrapped to the picture's width.
  std::vector<std::string> caption;
  const auto chars = static_cast<size_t>((width - 20) / text_width("x", 10));
  std::vector<std::string> parts = {"cost model: " + r.cost_model,
                                    sharding_type_summary(task, r.plan)};
  if (task.topology.hierarchical(n)) parts.push_back("hosts: " + task.topology.str(n));
  for (const std::string& part : parts) {
    for (std::string& line : wrapped(part, chars)) caption.push_back(std::move(line));
  }
  constexpr int kCaptionLine = 13;
  const int height = kTop + kPlotHeight + kGap + kMemHeight + 47 +
                     kCaptionLine * static_cast<int>(caption.size());
  double max_ms = std::max(r.bound.total_ms(), r.predicted.cost_ms);
  for (const DeviceCosts& c : r.predicted.devices) {  // a floor over a prediction shows too
    max_ms = std::max(max_ms, c.compute_floor_ms + c.comm_floor_ms);
  }
  if (max_ms <= 0) max_ms = 1;
  const double scale = kPlotHeight / (max_ms * 1.05);
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  s += text(kLeft, 22, title, "start", 14);
  for (size_t i = 0; i < caption.size(); ++i) {
    s += text(10, height - 8 - kCaptionLine * static_cast<double>(caption.size() - 1 - i),
              caption[i], "start", 10);
  }
  s += legend(kLeft, 44, r.model_source.bandwidths.memory_gbps > 0);
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
    const double floor = c.compute_floor_ms + c.comm_floor_ms;
    if (floor > 0) s += floor_mark(x, bar, base - floor * scale, d, floor);
    const double frac = static_cast<double>(c.memory_bytes) / task.device_mem_bytes[d];
    s += rect(x, mem_base - kMemHeight, bar, kMemHeight, "#eeeeee", "capacity");
    s += rect(x, mem_base - frac * kMemHeight, bar, frac * kMemHeight, kMemColor,
              fmt::format("device {}: {:.3f} of {:.3f} GB ({:.0f}%)", d, c.memory_bytes / 1e9,
                          task.device_mem_bytes[d] / 1e9, 100 * frac));
    if (n <= 32 || d % (n / 16) == 0) s += text(x + bar / 2, mem_base + 14, std::to_string(d), "middle", 11);
  }
  s += host_marks(task.topology, n, step, mem_base);
  s += text(kLeft - 8, mem_base - kMemHeight / 2, "memory", "end", 11);
  s += text(kLeft + step * n / 2, mem_base + 32, "device (* critical)", "middle", 12);
  s += "</svg>\n";
  return s;
}

}  // namespace embshard
