// The shards `embshard fit` measures on a new machine.
#include "embshard/bench/fit_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/synth.h"
#include "embshard/workload/stats.h"

namespace embshard {

namespace {

// Shards per (profile, batch) pair, split into those fitted on and those
// that judge; each part at least one.
std::pair<int64_t, int64_t> per_pair_split(int64_t samples, size_t pairs, double fit_share,
                                           const char* what) {
  const int64_t per_pair = (samples + static_cast<int64_t>(pairs) - 1) /
                           std::max<int64_t>(1, static_cast<int64_t>(pairs));
  const int64_t n_fit = std::llround(fit_share * static_cast<double>(per_pair));
  ES_CHECK(pairs >= 1 && n_fit >= 1 && per_pair - n_fit >= 1,
           "fit: {} {} cannot cover {} pools (profiles x batches), each with shards to fit "
           "on and to judge",
           samples, what, 2 * pairs);
  return {n_fit, per_pair - n_fit};
}

// The hot pools' pooling factor: about 1.2 million lookups a batch per hot
// table, in hundreds, 100-500 (500 up to batch 2048, 300 at 4096, 100 at
// 8192), so that no batch's pools take most of the measuring.
double hot_pooling(int64_t batch) {
  return std::clamp(100 * std::round(12000.0 / static_cast<double>(batch)), 100.0, 500.0);
}

}  // namespace

FitFiles measure_fit_data(const FitMeasureOptions& o, double fit_share, Reporter& reporter) {
  const size_t pairs = o.profiles.size() * o.batches.size();
  const auto [n_fit, n_judge] =
      per_pair_split(o.bench.samples, pairs, fit_share, "shards (--samples)");
  std::pair<int64_t, int64_t> hot{0, 0};
  if (o.hot_samples != 0) {
    ES_CHECK(o.hot_samples > 0, "fit: --hot-samples is {}, must be >= 0", o.hot_samples);
    hot = per_pair_split(o.hot_samples, pairs, fit_share, "hot-pool shards (--hot-samples)");
  }
  check_compute_bench_options(o.bench);  // before any pool is made
  FitFiles files;
  uint64_t seed = o.bench.seed;
  for (const std::string& profile : o.profiles) {
    for (const int64_t batch : o.batches) {
      ++seed;
      for (const bool is_hot : {false, true}) {
        if (is_hot && o.hot_samples == 0) continue;
        for (const bool judge : {false, true}) {
          // One pool to fit on, another (other tables) to judge the fit.
          const std::string name = fmt::format("{}{}{}_b{}", judge ? "test_" : "",
                                               is_hot ? "hot_" : "", profile, batch);
          const uint64_t pool_seed = seed + (judge ? 1000 : 0) + (is_hot ? 2000 : 0);
          const std::string pool = (std::filesystem::path(o.dir) / ("pool_" + name)).string();
          if (!std::filesystem::exists(std::filesystem::path(pool) / kTablesFile)) {
            SynthOptions so;
            so.profile = profile;
            so.num_tables = o.tables;
            so.batch_size = batch;
            so.seed = pool_seed;
            if (is_hot) {
              so.hot_tables = std::max(1, o.tables / 4);
              so.hot_pooling = hot_pooling(batch);
            }
            synthesize_workload(so, load_published_profile(profile), pool);
          }
          ComputeBenchOptions b = o.bench;
          b.workload_dir = pool;
          b.seed = pool_seed;
          if (is_hot) {
            b.samples = judge ? hot.second : hot.first;
            b.piece_share = o.hot_piece_share;
            b.max_tables = o.hot_max_tables;
          } else {
            b.samples = judge ? n_judge : n_fit;
          }
          b.out_path = (std::filesystem::path(o.dir) / ("fit_" + name + ".jsonl")).string();
          if (!files.fit.empty()) b.reference_from = files.fit.front();  // one scale for all
          run_compute_bench(b, reporter);
          (judge ? files.test : files.fit).push_back(b.out_path);
        }
      }
    }
  }
  return files;
}

}  // namespace embshard
