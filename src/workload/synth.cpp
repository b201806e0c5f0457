// Synthetic workload planning: per-bin targets, table draws, and the split of
// every reuse bin over the tables. Trace generation is in synth_trace.cpp.
#include "embshard/workload/synth.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "embshard/util/error.h"
#include "embshard/workload/table.h"
#include "synth_random.h"
#include "synth_internal.h"

namespace embshard {
namespace {

using namespace synth_detail;

constexpr double kOneHotShare = 0.3;        // tables with pooling ~1
constexpr double kMultiHotMinPooling = 1.5;
constexpr double kMaxPooling = 600;
constexpr double kLog10RowsMean = 4.3, kLog10RowsSd = 1.3;
constexpr double kLog10RowsMin = 2.0, kLog10RowsMax = 7.2;  // ~100 to ~16M rows
constexpr double kSkewPerSd = 0.3;    // tilt per standard deviation of log(lookups/rows)
constexpr double kSkewNoise = 0.15;   // per-table random tilt
constexpr int kSinkhornMaxIterations = 2000;

struct TableDraw {
  bool one_hot = false;
  double pooling = 0;
  int64_t rows = 0;
  int dim = 0;
  double skew_noise = 0, empty_bag_share = 0;
  int bag_shape = 1;
};

ReuseHistogram normalized(const ReuseHistogram& h) {
  double sum = 0;
  for (double v : h) sum += v;
  ReuseHistogram out{};
  for (int k = 0; k < kReuseBins; ++k) out[k] = sum > 0 ? h[k] / sum : 0.0;
  return out;
}

TableDraw draw_table(const SynthOptions& o, Rng& rng) {
  TableDraw d;
  d.one_hot = uniform01(rng) < kOneHotShare;
  d.pooling = d.one_hot ? 0.8 + 0.2 * uniform01(rng)
                        : std::exp(std::log(6.0) + 1.3 * standard_normal(rng));
  const double log10_rows = std::clamp(kLog10RowsMean + kLog10RowsSd * standard_normal(rng),
                                       kLog10RowsMin, kLog10RowsMax);
  d.rows = std::llround(std::pow(10.0, log10_rows));
  d.dim = o.dims[uniform_below(rng, o.dims.size())];
  d.skew_noise = standard_normal(rng);
  d.empty_bag_share = d.one_hot ? 0.0 : 0.15 * uniform01(rng);
  d.bag_shape = 1 + static_cast<int>(uniform_below(rng, 3));
  return d;
}

// Rescales the multi-hot tables' pooling factors so that the mean over all
// tables is `target` (one-hot tables keep theirs), within [1.5, 600].
void calibrate_pooling(std::vector<TableDraw>& draws, double target) {
  const double want = target * draws.size();
  for (int iter = 0; iter < 100; ++iter) {
    double fixed = 0, scaled = 0;
    for (const TableDraw& d : draws) (d.one_hot ? fixed : scaled) += d.pooling;
    if (std::fabs(fixed + scaled - want) < 1e-9 * want) return;
    const double factor = (want - fixed) / scaled;
    for (TableDraw& d : draws) {
      if (!d.one_hot) d.pooling = std::clamp(d.pooling * factor, kMultiHotMinPooling, kMaxPooling);
    }
  }
  // The bounds cannot reach the target (tiny or extreme inputs): scale all.
  double sum = 0;
  for (const TableDraw& d : draws) sum += d.pooling;
  for (TableDraw& d : draws) d.pooling *= want / sum;
}

std::vector<TableDraw> draw_tables(const SynthOptions& o, double avg_pooling, Rng& rng) {
  std::vector<TableDraw> draws;
  for (int64_t t = 0; t < o.num_tables; ++t) draws.push_back(draw_table(o, rng));
  if (std::all_of(draws.begin(), draws.end(), [](const TableDraw& d) { return d.one_hot; })) {
    draws.front().one_hot = false;  // someone has to carry the heavy tail
  }
  calibrate_pooling(draws, avg_pooling);
  return draws;
}

// Per-table skew: tables with many lookups per row lean to high reuse bins.
std::vector<double> table_skews(const std::vector<TableDraw>& draws, int64_t batch_size) {
  std::vector<double> density;
  for (const TableDraw& d : draws) {
    density.push_back(std::log2(std::max(d.pooling * batch_size, 1.0) / d.rows));
  }
  const double mean = std::accumulate(density.begin(), density.end(), 0.0) / density.size();
  double var = 0;
  for (double x : density) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / density.size());
  std::vector<double> skews;
  for (size_t t = 0; t < draws.size(); ++t) {
    const double z = sd > 0 ? std::clamp((density[t] - mean) / sd, -2.5, 2.5) : 0.0;
    skews.push_back(kSkewPerSd * z + kSkewNoise * draws[t].skew_noise);
  }
  return skews;
}

using Matrix = std::vector<ReuseHistogram>;  // [table][bin]

// Iterative proportional fitting: scales the tilted weights until the table
// sums are `table_lookups` and the bin sums `bin_lookups`. Bins a table is
// too small to hold (a row's mean count above its lookups) stay masked.
Matrix fit_lookups(const std::vector<double>& table_lookups, const ReuseCounts& bin_lookups,
                   const std::array<double, kReuseBins>& mean_count,
                   const std::vector<double>& skews) {
  const size_t T = table_lookups.size();
  const size_t largest =
      std::max_element(table_lookups.begin(), table_lookups.end()) - table_lookups.begin();
  Matrix x(T);
  for (size_t t = 0; t < T; ++t) {
    for (int k = 0; k < kReuseBins; ++k) {
      const bool fits = k == 0 || table_lookups[t] >= mean_count[k] || t == largest;
      x[t][k] = fits && bin_lookups[k] > 0 ? std::exp(skews[t] * k) : 0.0;
    }
  }
  for (int iter = 0; iter < kSinkhornMaxIterations; ++iter) {
    for (size_t t = 0; t < T; ++t) {
      const double sum = std::accumulate(x[t].begin(), x[t].end(), 0.0);
      if (sum > 0) {
        for (double& v : x[t]) v *= table_lookups[t] / sum;
      }
    }
    double worst = 0;
    for (int k = 0; k < kReuseBins; ++k) {
      double sum = 0;
      for (size_t t = 0; t < T; ++t) sum += x[t][k];
      if (sum <= 0) continue;
      worst = std::max(worst, std::fabs(sum - bin_lookups[k]) / std::max<double>(bin_lookups[k], 1));
      for (size_t t = 0; t < T; ++t) x[t][k] *= bin_lookups[k] / sum;
    }
    if (worst < 1e-9) break;
  }
  return x;
}

}  // namespace

namespace synth_detail {

int64_t bin_count_lower(int bin) { return static_cast<int64_t>(reuse_bin_lower(bin)); }
int64_t bin_count_upper(int bin) {
  // The last bin is open-ended; generated rows stay within 4x its lower edge.
  return bin == kReuseBins - 1 ? int64_t{1} << (kReuseBins) : static_cast<int64_t>(reuse_bin_upper(bin));
}

std::vector<int64_t> apportion(int64_t total, const std::vector<double>& weights) {
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int64_t> out(weights.size(), 0);
  if (total == 0) return out;
  ES_CHECK(sum > 0, "apportion: {} units over {} zero weights", total, weights.size());
  std::vector<std::pair<double, size_t>> order;
  int64_t assigned = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double quota = static_cast<double>(total) * (weights[i] / sum);
    out[i] = static_cast<int64_t>(std::floor(quota));
    assigned += out[i];
    if (weights[i] > 0) order.emplace_back(quota - std::floor(quota), i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t j = 0; assigned < total; j = (j + 1) % order.size(), ++assigned) {
    out[order[j].second] += 1;
  }
  for (size_t i = 0; assigned > total; i = (i + 1) % out.size()) {  // rounding overshoot
    if (out[i] > 0) out[i] -= 1, --assigned;
  }
  return out;
}

std::vector<int64_t> apportion_exact(int64_t total, const std::vector<int64_t>& parts,
                                     int64_t parts_sum) {
  std::vector<int64_t> out(parts.size(), 0);
  if (parts_sum == 0) return out;
  std::vector<std::pair<int64_t, size_t>> order;
  int64_t assigned = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const __int128 num = static_cast<__int128>(total) * parts[i];
    out[i] = static_cast<int64_t>(num / parts_sum);
    assigned += out[i];
    order.emplace_back(static_cast<int64_t>(num % parts_sum), i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t j = 0; assigned < total; ++j, ++assigned) out[order[j].second] += 1;
  return out;
}

std::array<double, kReuseBins> mean_counts(const PublishedStats& target) {
  const ReuseHistogram rows = normalized(target.row_reuse);
  const ReuseHistogram lookups = normalized(target.lookup_reuse);
  std::array<double, kReuseBins> m{};
  m[0] = 1;
  for (int k = 1; k < kReuseBins; ++k) {
    const double lo = bin_count_lower(k), hi = bin_count_upper(k);
    // Shares printed as 0.000 carry no information: take the bin's middle.
    m[k] = rows[k] > 0 && lookups[k] > 0
               ? std::clamp(lookups[k] / (rows[k] * target.unique_ratio), lo, hi)
               : std::sqrt(lo * hi);
  }
  return m;
}

// Bin k has lookups but fewer than one row needs (small batches): either
// fold them into the bin below, or top the bin up to one row with lookups
// borrowed from the bins below, whichever moves fewer lookups.
void settle_small_bin(BinTotals& b, int k) {
  const int64_t have = b.lookups[k], deficit = bin_count_lower(k) - have;
  int64_t below = 0;
  for (int j = 0; j < k; ++j) below += b.lookups[j];
  if (deficit < have && deficit <= below) {
    for (int j = k - 1; j >= 0 && b.lookups[k] < have + deficit; --j) {
      const int64_t take = std::min(b.lookups[j], have + deficit - b.lookups[k]);
      b.lookups[j] -= take;
      b.lookups[k] += take;
    }
  } else {
    b.lookups[k - 1] += have;
    b.lookups[k] = 0;
  }
}

BinTotals bin_totals(const PublishedStats& target, int64_t num_indices) {
  const auto m = mean_counts(target);
  const ReuseHistogram shares = normalized(target.lookup_reuse);
  const auto split = apportion(num_indices, std::vector<double>(shares.begin(), shares.end()));
  BinTotals b;
  std::copy(split.begin(), split.end(), b.lookups.begin());
  for (int k = kReuseBins - 1; k >= 1; --k) {
    if (b.lookups[k] > 0 && b.lookups[k] < bin_count_lower(k)) settle_small_bin(b, k);
    const int64_t lo = bin_count_lower(k), hi = bin_count_upper(k), n = b.lookups[k];
    if (n == 0) continue;
    const int64_t fewest = (n + hi - 1) / hi, most = n / lo;
    b.rows[k] = fewest <= most ? std::clamp<int64_t>(std::llround(n / m[k]), fewest, most) : most;
    const int64_t excess = std::max<int64_t>(0, n - b.rows[k] * hi);  // e.g. odd n in bin (1, 2]
    b.lookups[k] -= excess;
    b.lookups[k - 1] += excess;
  }
  b.rows[0] = b.lookups[0];
  return b;
}

}  // namespace synth_detail

void validate_synth_options(const SynthOptions& o) {
  const auto& profiles = published_profiles();
  ES_CHECK(std::find(profiles.begin(), profiles.end(), o.profile) != profiles.end(),
           "synth: unknown profile '{}' (valid profiles: {})", o.profile, fmt::join(profiles, ", "));
  ES_CHECK(o.num_tables > 0 && o.num_tables <= kMaxTables, "synth: --tables is {}, must be in 1..{}",
           o.num_tables, kMaxTables);
  ES_CHECK(o.batch_size > 0 && o.batch_size <= kMaxBatch, "synth: --batch is {}, must be in 1..{}",
           o.batch_size, kMaxBatch);
  ES_CHECK(!o.dims.empty(), "synth: --dims is empty, give at least one dimension");
  for (int dim : o.dims) {
    ES_CHECK(dim >= 1 && dim <= 1024, "synth: --dims value {} is out of range 1..1024", dim);
  }
  ES_CHECK(o.index_bytes == 4 || o.index_bytes == 8, "synth: --index-bytes is {}, must be 4 or 8",
           o.index_bytes);
  ES_CHECK(o.huge_tables >= 0 && o.hot_tables >= 0 && o.huge_tables + o.hot_tables <= o.num_tables,
           "synth: --huge-tables {} + --hot-tables {} must be within --tables {}", o.huge_tables,
           o.hot_tables, o.num_tables);
  ES_CHECK(o.huge_tables == 0 || (o.huge_rows > 0 && o.huge_rows <= kMaxRows),
           "synth: --huge-tables {} needs --huge-rows in 1..{} (it is {})", o.huge_tables,
           kMaxRows, o.huge_rows);
  ES_CHECK(o.huge_tables == 0 || o.index_bytes == 8 ||
               o.huge_rows <= std::numeric_limits<int32_t>::max(),
           "synth: --huge-rows {} is more than 4-byte indices hold; use --index-bytes 8",
           o.huge_rows);
  ES_CHECK(o.hot_tables == 0 || o.hot_pooling > 0, "synth: --hot-tables {} needs --hot-pooling > 0",
           o.hot_tables);
}

namespace {

// The stress tables of SynthOptions: huge rows, hot pooling factors.
void add_stress_tables(const SynthOptions& o, SynthPlan& plan) {
  for (int64_t t = 0; t < o.huge_tables; ++t) {
    plan.tables[t].rows = std::max(plan.tables[t].rows, o.huge_rows);
  }
  for (int64_t t = o.huge_tables; t < o.huge_tables + o.hot_tables; ++t) {
    SynthTablePlan& p = plan.tables[t];
    // A whole factor: rows and lookups of a bin scale together, so that each
    // row keeps its access count (and its bin); the pooling factor comes out
    // near hot_pooling.
    const int64_t factor = std::max<int64_t>(
        1, std::llround(o.hot_pooling * static_cast<double>(o.batch_size) /
                        std::max<int64_t>(1, p.num_indices())));
    for (int k = 0; k < kReuseBins; ++k) {
      p.rows_per_bin[k] *= factor;
      p.lookups_per_bin[k] *= factor;
    }
    p.rows = std::max(p.rows, p.unique_rows());
    p.empty_bag_share = 0;
  }
}

}  // namespace

int64_t SynthTablePlan::num_indices() const {
  return std::accumulate(lookups_per_bin.begin(), lookups_per_bin.end(), int64_t{0});
}
int64_t SynthTablePlan::unique_rows() const {
  return std::accumulate(rows_per_bin.begin(), rows_per_bin.end(), int64_t{0});
}

SynthPlan plan_synth(const SynthOptions& options, const PublishedStats& target) {
  validate_synth_options(options);
  Rng rng(mix_seed(options.seed, 0xC0FFEE));
  const auto draws = draw_tables(options, target.avg_pooling_factor, rng);
  const size_t T = draws.size();
  std::vector<double> table_lookups;
  for (const TableDraw& d : draws) table_lookups.push_back(d.pooling * options.batch_size);
  const int64_t num_indices = std::llround(target.avg_pooling_factor * T * options.batch_size);
  const BinTotals bins = bin_totals(target, num_indices);
  const auto m = mean_counts(target);
  const Matrix fitted =
      fit_lookups(table_lookups, bins.lookups, m, table_skews(draws, options.batch_size));

  SynthPlan plan{options, target, std::vector<SynthTablePlan>(T)};
  for (int k = 0; k < kReuseBins; ++k) {
    std::vector<double> weights(T);
    for (size_t t = 0; t < T; ++t) weights[t] = fitted[t][k] / m[k];
    const auto rows = apportion(bins.rows[k], weights);
    const auto lookups = apportion_exact(bins.lookups[k], rows, bins.rows[k]);
    for (size_t t = 0; t < T; ++t) {
      plan.tables[t].rows_per_bin[k] = rows[t];
      plan.tables[t].lookups_per_bin[k] = lookups[t];
    }
  }
  const int width = std::max<int>(3, static_cast<int>(std::to_string(T - 1).size()));
  for (size_t t = 0; t < T; ++t) {
    SynthTablePlan& p = plan.tables[t];
    p.name = fmt::format("t{:0{}}", t, width);
    p.rows = std::max(draws[t].rows, p.unique_rows());
    p.dim = draws[t].dim;
    p.seed = mix_seed(options.seed, t + 1);
    p.empty_bag_share = draws[t].empty_bag_share;
    p.bag_shape = draws[t].bag_shape;
    ES_CHECK(options.index_bytes == 8 || p.rows <= std::numeric_limits<int32_t>::max(),
             "synth: table {} needs {} rows, more than 4-byte indices hold; use --index-bytes 8",
             p.name, p.rows);
  }
  add_stress_tables(options, plan);
  return plan;
}

SynthPlan plan_synth_from_specs(const Workload& specs, uint64_t seed, uint32_t index_bytes) {
  ES_CHECK(!specs.tables.empty() && specs.batch_size > 0,
           "synth: {} has no tables or no batch size", specs.source);
  SynthPlan plan;
  plan.options.num_tables = static_cast<int64_t>(specs.tables.size());
  plan.options.batch_size = specs.batch_size;
  plan.options.seed = seed;
  plan.options.index_bytes = index_bytes;
  for (size_t t = 0; t < specs.tables.size(); ++t) {
    const TableSpec& spec = specs.tables[t];
    // The table's own statistics stand in for a profile's.
    PublishedStats own;
    own.row_reuse = spec.row_reuse;
    own.lookup_reuse = spec.lookup_reuse;
    own.avg_pooling_factor = spec.pooling_factor;
    const int64_t lookups = std::llround(spec.pooling_factor * specs.batch_size);
    own.unique_ratio = lookups > 0 ? static_cast<double>(spec.unique_rows) / lookups : 1.0;
    SynthTablePlan p;
    if (lookups > 0) {
      const BinTotals bins = bin_totals(own, lookups);
      p.rows_per_bin = bins.rows;
      p.lookups_per_bin = bins.lookups;
    }
    if (p.unique_rows() > spec.rows) {
      // Fewer rows than the histograms need: every row looked up q or q + 1
      // times (lookups > distinct rows > rows, so q >= 1).
      p.rows_per_bin = {};
      p.lookups_per_bin = {};
      const int64_t q = lookups / spec.rows, more = lookups % spec.rows;
      p.rows_per_bin[reuse_bin(q)] += spec.rows - more;
      p.lookups_per_bin[reuse_bin(q)] += (spec.rows - more) * q;
      p.rows_per_bin[reuse_bin(q + 1)] += more;
      p.lookups_per_bin[reuse_bin(q + 1)] += more * (q + 1);
    }
    p.name = spec.name;
    p.rows = std::max(spec.rows, p.unique_rows());
    p.dim = spec.dim;
    p.seed = mix_seed(seed, t + 1);
    p.empty_bag_share = 0;
    p.bag_shape = 2;
    ES_CHECK(index_bytes == 8 || p.rows <= std::numeric_limits<int32_t>::max(),
             "synth: table {} needs {} rows, more than 4-byte indices hold; use --index-bytes 8",
             p.name, p.rows);
    plan.tables.push_back(p);
  }
  return plan;
}

}  // namespace embshard
