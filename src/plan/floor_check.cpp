// A plan's predictions against their physical floors (cost/floor.h).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/plan/predict.h"
#include "embshard/plan/report.h"
#include "embshard/util/units.h"

namespace embshard {
namespace {

// How many of the flagged devices or shards a warning names.
constexpr size_t kNamed = 3;

struct Flagged {
  double ratio = 0;  // prediction / floor
  std::string text;
};

// "3 shards are predicted ... (farthest: A; B; C and 2 more)": the flagged,
// farthest from 1 first.
std::string flagged_line(std::vector<Flagged> flagged, const std::string& what) {
  std::sort(flagged.begin(), flagged.end(), [](const Flagged& a, const Flagged& b) {
    return std::max(a.ratio, 1 / a.ratio) > std::max(b.ratio, 1 / b.ratio);
  });
  std::vector<std::string> named;
  for (size_t i = 0; i < std::min(kNamed, flagged.size()); ++i) named.push_back(flagged[i].text);
  return fmt::format(
      "{} {} (farthest: {}{})", count_of(static_cast<int64_t>(flagged.size()), "shard"), what,
      fmt::join(named, "; "),
      flagged.size() > kNamed ? fmt::format(" and {} more", flagged.size() - kNamed) : "");
}

std::string against(double ms, double floor) {
  return fmt::format("{:.3f} ms, {:.{}f}x its floor {:.4f} ms", ms, ms / floor,
                     ms / floor < 10 ? 1 : 0, floor);
}

// Each shard's own prediction against its own floor: those under always,
// those far over where `over` (a device is far over its floor).
void shard_warnings(const PlanTask& task, const Plan& plan, ShardCosts& costs, bool over,
                    std::vector<std::string>& out) {
  const Bandwidths& b = costs.model().source.bandwidths;
  std::vector<Flagged> flagged[2];  // under, far over
  for (const Shard& s : plan.shards) {
    const double floor = shard_floor_ms(task, s, b.memory_gbps);
    const double ms = costs.single_ms(costs.shard_id(s));
    const FloorCheck check = check_floor(ms, floor);
    if (check == FloorCheck::kWithin || (check == FloorCheck::kFarOver && !over)) continue;
    const TableSpec& t = task.tables[s.table];
    flagged[check == FloorCheck::kUnder ? 0 : 1].push_back(
        {ms / floor,
         fmt::format("'{}' {}: {}", t.name,
                     shard_text(s.device, s.cols, s.row_offset, s.rows, t.rows, s.replica),
                     against(ms, floor))});
  }
  if (!flagged[0].empty()) {
    out.push_back(flagged_line(flagged[0], "predicted alone under their physical floors"));
  }
  if (!flagged[1].empty()) {
    out.push_back(flagged_line(
        flagged[1],
        fmt::format("predicted alone over {:g}x their physical floors", kFarOverFloor)));
  }
}

}  // namespace

std::vector<std::string> floor_warnings(const PlanTask& task, const Plan& plan,
                                        const PlanPrediction& p, ShardCosts& costs) {
  const Bandwidths& b = costs.model().source.bandwidths;
  std::vector<std::string> out;
  std::vector<Flagged> over;
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const DeviceCosts& c = p.devices[d];
    const FloorCheck check = check_floor(c.compute_ms, c.compute_floor_ms);
    if (check == FloorCheck::kUnder) {
      out.push_back(fmt::format("device {}: predicted compute {} is under its physical floor", d,
                                against(c.compute_ms, c.compute_floor_ms)));
    } else if (check == FloorCheck::kFarOver) {
      over.push_back({c.compute_ms / c.compute_floor_ms,
                      fmt::format("device {}: {}", d, against(c.compute_ms, c.compute_floor_ms))});
    }
    const double comm = c.fwd_comm_ms + c.bwd_comm_ms;
    if (check_floor(comm, c.comm_floor_ms) == FloorCheck::kUnder) {
      out.push_back(fmt::format(
          "device {}: predicted all-to-alls {:.3f} ms are under their physical floor {:.3f} ms "
          "(the busier direction's bytes, forward and backward, at {:.1f} GB/s)",
          d, comm, c.comm_floor_ms, b.link_gbps));
    }
  }
  if (!over.empty()) {
    std::sort(over.begin(), over.end(),
              [](const Flagged& x, const Flagged& y) { return x.ratio > y.ratio; });
    out.push_back(
        fmt::format("{} of {} devices predicted over {:g}x their physical compute floors "
                    "(farthest: {})",
                    over.size(), p.devices.size(), kFarOverFloor, over.front().text));
  }
  if (b.memory_gbps > 0) shard_warnings(task, plan, costs, !over.empty(), out);
  return out;
}

}  // namespace embshard
