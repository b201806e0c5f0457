// A measurement's scale from anchor shards priced by a cost model.
#include "embshard/cost/anchors.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/neural/model.h"
#include "embshard/measure/shard_draw.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/random.h"
#include "embshard/util/reporter.h"
#include "embshard/util/statistics.h"
#include "embshard/workload/stats.h"
#include "embshard/workload/synth.h"

namespace embshard {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kProfiles[] = {"2021", "2022"};
constexpr double kMinScaleSpread = 0.05;

// The anchors' pools: removed with what they hold when the anchors are done
// or fail, and by the signal handlers if a signal ends the process.
class PoolDir {
 public:
  PoolDir() : path_(fs::temp_directory_path() / fmt::format("embshard-anchors-{}", ::getpid())) {
    guards_.push_back(std::make_unique<TempFileGuard>(path_.string(), true));
    for (const char* profile : kProfiles) {
      const fs::path pool = path_ / profile;
      guards_.push_back(std::make_unique<TempFileGuard>(pool.string(), true));
      for (const char* file : {kTraceFile, kTablesFile}) {
        guards_.push_back(std::make_unique<TempFileGuard>((pool / file).string()));
      }
    }
  }
  ~PoolDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string pool(const char* profile) const { return (path_ / profile).string(); }

 private:
  fs::path path_;
  std::vector<std::unique_ptr<TempFileGuard>> guards_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void check_anchor_options(const AnchorOptions& o) {
  ES_CHECK(o.count >= 2 && o.batch_size >= 1 && o.max_tables >= 1 && o.mem_cap_bytes > 0 &&
               o.pool_tables >= 1 && !o.dims.empty(),
           "anchors: count {} / batch {} / max tables {} / cap {} / pool tables {} / {} dims "
           "invalid (need >= 2, >= 1, >= 1, > 0, >= 1, some)",
           o.count, o.batch_size, o.max_tables, o.mem_cap_bytes, o.pool_tables, o.dims.size());
}

// The anchors of one pool: draws whose weights fit the cap, priced by the model.
void draw_pool_anchors(const Workload& pool, const std::string& profile, int count,
                       const NeuralModel& model, const AnchorOptions& o, std::vector<Anchor>& out) {
  const ShardDraw draw{o.max_tables,
                       o.mem_cap_bytes,
                       o.dims,
                       0.0,
                       item_seed(o.seed, profile == kProfiles[0] ? 2 : 3),
                       {}};
  for (int k = 0; k < count; ++k) {
    Anchor a;
    a.pool = profile;
    a.tables = draw_shard(pool, draw, k);
    std::vector<TableFeatures> features;
    for (const ShardTable& t : a.tables) {
      const TableSpec& spec = pool.tables[t.table];
      features.push_back(table_features(spec, t.dim));
      features.back().data_type = t.data_type;
      a.weight_bytes += static_cast<double>(spec.rows) * data_type_row_bytes(t.data_type, t.dim);
    }
    a.predicted_ms = predict_compute_ms(model, features, pool.batch_size);
    out.push_back(std::move(a));
  }
}

}  // namespace

AnchorScale fit_anchor_scale(std::vector<Anchor> anchors) {
  ES_CHECK(!anchors.empty(), "anchors: none measured");
  std::vector<double> logs;
  for (const Anchor& a : anchors) {
    ES_CHECK(std::isfinite(a.predicted_ms) && a.predicted_ms > 0 && std::isfinite(a.ratio) &&
                 a.ratio > 0,
             "anchors: an anchor of pool {} has predicted {} ms and ratio {}: both must be "
             "positive",
             a.pool, a.predicted_ms, a.ratio);
    logs.push_back(std::log(a.predicted_ms / a.ratio));
  }
  AnchorScale s;
  s.anchors = std::move(anchors);
  const double center = median(logs);
  s.reference_ms = std::exp(center);
  s.spread = median_absolute_deviation(logs);
  const MedianInterval ci = median_confidence_interval(logs, 0.95);
  s.ci_low_ms = std::exp(ci.low);
  s.ci_high_ms = std::exp(ci.high);
  return s;
}

AnchorScale measure_anchor_scale(ShardTimer& file_timer, const NeuralModel& model,
                                 const std::string& model_dir, const AnchorOptions& o,
                                 Reporter& reporter) {
  check_anchor_options(o);
  const auto start = std::chrono::steady_clock::now();
  const PoolDir dir;
  std::vector<Anchor> anchors;
  std::vector<Workload> pools;
  pools.reserve(std::size(kProfiles));
  for (const char* profile : kProfiles) {
    SynthOptions so;
    so.profile = profile;
    so.num_tables = o.pool_tables;
    so.batch_size = o.batch_size;
    so.seed = item_seed(o.seed, pools.size());
    pools.push_back(synthesize_workload(so, load_published_profile(profile), dir.pool(profile)));
    const int count = profile == kProfiles[0] ? o.count / 2 : o.count - o.count / 2;
    draw_pool_anchors(pools.back(), profile, count, model, o, anchors);
  }
  // Each pool's timer measures its anchors against the file's probe; the
  // first probe reference (a short window) only bounds the probe's drift.
  ShardTimerOptions timer_options = o.timer;
  timer_options.reference.min_window_ms = 1000;
  timer_options.reference.min_runs = 20;
  Progress progress(reporter, "anchors", anchors.size());
  size_t done = 0;
  std::optional<ProbeReference> bound;
  for (size_t p = 0; p < pools.size(); ++p) {
    ShardTimer timer(pools[p], file_timer.executor(), timer_options);
    timer.share_probe(file_timer);
    if (bound) timer.set_probe_reference(*bound);
    bound = timer.probe_reference();
    for (Anchor& a : anchors) {
      if (a.pool != kProfiles[p]) continue;
      const ShardMeasurement m =
          timer.measure(a.tables, fmt::format("anchor {} of pool {}", done, a.pool));
      a.ratio = m.interleaved.ratio_median;
      a.raw_ms = m.raw.total_ms;
      a.probe_ms = m.interleaved.probe_median_ms;
      progress.update(++done,
                      fmt::format("predicted {:.2f} ms, {:.3f} probes", a.predicted_ms, a.ratio));
    }
  }
  AnchorScale scale = fit_anchor_scale(std::move(anchors));
  scale.model = model_dir;
  scale.seconds = seconds_since(start);
  progress.finish(fmt::format("the probe at {:.3f} ms in the model's units (spread {:.1f}%)",
                              scale.reference_ms, 100 * scale.spread));
  return scale;
}

ProbeReference anchor_probe_reference(const AnchorScale& scale) {
  ProbeReference r;
  r.reference_ms = scale.reference_ms;
  r.median_ms = scale.reference_ms;
  r.dispersion = scale.spread;
  r.window_ms = 1e3 * scale.seconds;
  return r;
}

json anchor_scale_json(const AnchorScale& scale, const AnchorOptions& options) {
  json anchors = json::array();
  for (const Anchor& a : scale.anchors) {
    json tables = json::array();
    for (const ShardTable& t : a.tables) tables.push_back({t.table, t.dim});
    anchors.push_back({{"pool", a.pool},
                       {"tables", tables},
                       {"weight_bytes", a.weight_bytes},
                       {"predicted_ms", a.predicted_ms},
                       {"ratio", a.ratio},
                       {"raw_ms", a.raw_ms},
                       {"probe_ms", a.probe_ms}});
  }
  return {{"method", "anchors"},
          {"model", scale.model},
          {"reference_ms", scale.reference_ms},
          {"spread", scale.spread},
          {"ci_ms", {scale.ci_low_ms, scale.ci_high_ms}},
          {"count", scale.anchors.size()},
          {"seed", options.seed},
          {"batch_size", options.batch_size},
          {"mem_cap_bytes", options.mem_cap_bytes},
          {"seconds", scale.seconds},
          {"anchors", anchors}};
}

namespace {

// The probe reference of a header or a model's data entry: "/probe/reference"
// (bench compute) or "/probe_reference" (eval); 0 where it has none.
double reference_of(const json& j, double* dispersion) {
  for (const char* pointer : {"/probe/reference", "/probe_reference"}) {
    const json::json_pointer at(pointer);
    if (!j.is_object() || !j.contains(at) || !j.at(at).is_object()) continue;
    const json& r = j.at(at);
    const auto number = [&](const char* key) {
      const auto it = r.find(key);
      return it != r.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    if (dispersion) *dispersion = number("dispersion");
    const double ms = number("reference_ms");
    return std::isfinite(ms) && ms > 0 ? ms : 0.0;
  }
  return 0;
}

std::string method_of(const json& j) {
  const json::json_pointer at("/scale/method");
  return j.is_object() && j.contains(at) && j.at(at).is_string() ? j.at(at).get<std::string>() : "";
}

}  // namespace

std::optional<ScaleCheck> check_file_scale(const json& header, const std::string& path,
                                           const json* model_files) {
  ScaleCheck c;
  c.file_ms = reference_of(header, nullptr);
  if (c.file_ms <= 0 || model_files == nullptr || !model_files->is_array()) return std::nullopt;
  // At least the anchors' own spread from run to run (3.16-3.38 ms over ten
  // runs beside neighbours, docs/measurement.md).
  std::vector<double> logs, spreads = {kMinScaleSpread};
  for (const json& entry : *model_files) {
    double dispersion = 0;
    const double ms = reference_of(entry, &dispersion);
    if (ms <= 0) return std::nullopt;  // a model's data of another kind: nothing to compare
    logs.push_back(std::log(ms));
    if (std::isfinite(dispersion)) spreads.push_back(std::abs(dispersion));
  }
  if (logs.empty()) return std::nullopt;
  double mean = 0;
  for (double l : logs) mean += l / static_cast<double>(logs.size());
  for (double l : logs) spreads.push_back(std::expm1(std::abs(l - mean)));
  c.model_ms = std::exp(mean);
  c.model_spread = *std::max_element(spreads.begin(), spreads.end());
  c.method = method_of(header);
  const double moved = c.file_ms / c.model_ms - 1;
  c.moved_past_spread = std::abs(moved) > c.model_spread;
  const std::string how =
      c.method == "anchors"
          ? fmt::format("anchors put the probe at {:.3f} ms in the model's units", c.file_ms)
          : fmt::format("the probe's quiet time {:.3f} ms", c.file_ms);
  std::string why;
  if (c.moved_past_spread) {
    why = c.method == "anchors"
              ? ": the probe ran at another speed against the work than in the model's data (a "
                "neighbour, or another machine); the anchors carried the file to the model's "
                "scale"
              : ": one window's scale, carried into every figure of the file (bench compute "
                "--scale anchors does not depend on one window)";
  }
  c.text = fmt::format(
      "{}: scale: {}; the model's data {:.3f} ms ({:+.1f}%, {} their spread of "
      "{:.1f}%){}",
      path, how, c.model_ms, 100 * moved, c.moved_past_spread ? "past" : "within",
      100 * c.model_spread, why);
  return c;
}

}  // namespace embshard
