// `embshard bench repeat`: the same shards measured twice, raw and normalized.
#include "embshard/bench/repeatability.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/util/error.h"
#include "embshard/util/huge_buffer.h"
#include "embshard/util/reporter.h"
#include "embshard/util/statistics.h"
#include "embshard/util/text_table.h"

namespace embshard {

AgreementFigures agreement(const std::vector<RepeatShard>& shards, bool normalized) {
  std::vector<double> d;
  for (const RepeatShard& s : shards) {
    const double a = normalized ? s.normalized_ms[0] : s.raw_ms[0];
    const double b = normalized ? s.normalized_ms[1] : s.raw_ms[1];
    d.push_back(100 * std::abs(a - b) / (0.5 * (a + b)));
  }
  if (d.empty()) return {};
  AgreementFigures f;
  f.mean_pct = mean(d);
  f.median_pct = median(d);
  f.p90_pct = quantile(d, 0.9);
  f.max_pct = quantile(d, 1.0);
  return f;
}

RepeatResult run_repeatability(const ComputeBenchOptions& options, Reporter& reporter) {
  ES_CHECK(options.samples >= 1, "bench repeat: --samples is {}, must be >= 1", options.samples);
  const Workload workload = load_workload(options.workload_dir);
  const std::unique_ptr<Executor> executor = create_executor(options);
  ShardTimer timer(workload, *executor, shard_timer_options(options));
  RepeatResult result;
  result.executor = executor->name();
  result.keep_rounds = options.keep_rounds;
  reporter.note(fmt::format("bench repeat: measuring the reference probe on {} for {} s",
                            executor->name(), options.reference_window_s));
  result.reference_ms = timer.probe_reference().reference_ms;
  result.shards.resize(options.samples);
  Progress progress(reporter, "bench repeat", 2 * static_cast<uint64_t>(options.samples));
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t i = 0; i < options.samples; ++i) {
      const std::vector<ShardTable> shard = draw_shard(workload, options, i);
      ShardMeasurement m = timer.measure(shard, fmt::format("pass {} sample {}", pass + 1, i));
      RepeatShard& s = result.shards[i];
      s.sample = i;
      s.tables = static_cast<int>(shard.size());
      s.raw_ms[pass] = m.raw.total_ms;
      s.normalized_ms[pass] = m.normalized.total_ms;
      s.rounds[pass] = std::move(m.interleaved);
      progress.update(static_cast<uint64_t>(pass * options.samples + i + 1));
    }
  }
  progress.finish();
  result.raw = agreement(result.shards, false);
  result.normalized = agreement(result.shards, true);
  return result;
}

std::string repeat_report(const RepeatResult& r, bool per_shard) {
  std::string out;
  if (per_shard) {
    TextTable shards({"sample", "tables", "raw ms 1", "raw ms 2", "raw diff %", "normalized ms 1",
                      "normalized ms 2", "normalized diff %"});
    for (const RepeatShard& s : r.shards) {
      const auto diff = [](const double* v) {
        return fmt::format("{:.1f}", 100 * std::abs(v[0] - v[1]) / (0.5 * (v[0] + v[1])));
      };
      shards.add_row({std::to_string(s.sample), std::to_string(s.tables),
                      fmt::format("{:.3f}", s.raw_ms[0]), fmt::format("{:.3f}", s.raw_ms[1]),
                      diff(s.raw_ms), fmt::format("{:.3f}", s.normalized_ms[0]),
                      fmt::format("{:.3f}", s.normalized_ms[1]), diff(s.normalized_ms)});
    }
    out += shards.render() + "\n";
  }
  TextTable summary({"the same shards measured twice", "mean diff %", "median %", "p90 %",
                     "max %"});
  for (const auto& [name, f] : {std::pair<std::string, AgreementFigures>{"raw (own medians)", r.raw},
                                {"normalized (against the probe)", r.normalized}}) {
    summary.add_row({name, fmt::format("{:.2f}", f.mean_pct), fmt::format("{:.2f}", f.median_pct),
                     fmt::format("{:.2f}", f.p90_pct), fmt::format("{:.2f}", f.max_pct)});
  }
  return out + fmt::format("{} shards on {}; reference probe {:.3f} ms quiet\n", r.shards.size(),
                           r.executor, r.reference_ms) +
         summary.render();
}

nlohmann::json repeat_json(const RepeatResult& r) {
  const auto figures = [](const AgreementFigures& f) {
    return nlohmann::json{{"mean_pct", f.mean_pct}, {"median_pct", f.median_pct},
                          {"p90_pct", f.p90_pct}, {"max_pct", f.max_pct}};
  };
  nlohmann::json shards = nlohmann::json::array();
  for (const RepeatShard& s : r.shards) {
    shards.push_back({{"sample", s.sample},
                      {"tables", s.tables},
                      {"raw_ms", {s.raw_ms[0], s.raw_ms[1]}},
                      {"normalized_ms", {s.normalized_ms[0], s.normalized_ms[1]}}});
    if (r.keep_rounds) {
      shards.back()["per_round"] = {interleaved_rounds_json(s.rounds[0]),
                                    interleaved_rounds_json(s.rounds[1])};
    }
  }
  return {{"executor", r.executor},
          {"reference_ms", r.reference_ms},
          {"raw", figures(r.raw)},
          {"normalized", figures(r.normalized)},
          {"shards", shards}};
}

void stream_memory(int64_t bytes, double seconds) {
  ES_CHECK(bytes >= 4096 && seconds > 0, "bench stream: --bytes {} / --seconds {} invalid", bytes,
           seconds);
  HugeBuffer a(bytes), b(bytes);
  std::memset(a.data(), 1, bytes);
  std::memset(b.data(), 2, bytes);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) std::memcpy(b.data(), a.data(), bytes);
}

}  // namespace embshard
