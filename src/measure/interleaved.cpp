// Interleaved timing against reference probes: see the header for the protocol.
#include "embshard/measure/interleaved.h"

#include <chrono>
#include <cmath>
#include <numeric>
#include <span>
#include <thread>
#include <utility>

#include "embshard/util/error.h"
#include "embshard/util/json_field.h"
#include "embshard/util/random.h"
#include "embshard/util/statistics.h"

namespace embshard {
namespace {

using nlohmann::json;

std::string name_of(const std::string& label) {
  return label.empty() ? std::string("interleaved timing") : label;
}

// Draw `index` of stream `stream`: a pure function of the seed, so the
// orders do not depend on the standard library's shuffle or distributions.
class Draws {
 public:
  explicit Draws(uint64_t seed) : seed_(seed) {}
  // Uniform in [0, n); the modulo bias is below n / 2^64, far beneath
  // anything a timing can notice.
  size_t below(size_t n) { return static_cast<size_t>(item_seed(seed_, count_++) % n); }
  template <typename T>
  void shuffle(std::vector<T>& items) {  // Fisher-Yates
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  uint64_t seed_;
  uint64_t count_ = 0;
};

// Distinct streams for the warm-up and the timed blocks of one seed.
constexpr uint64_t kWarmupStream = 0x5741524dULL;  // "WARM"
constexpr uint64_t kBlockStream = 0x424c4f43ULL;   // "BLOC"

constexpr int kWork = -1;  // in a round's order: the work; otherwise a probe's index

double checked_time(const TimerFn& timer, const std::string& label, int callable, int round,
                    const char* phase) {
  const double ms = timer();
  ES_CHECK(std::isfinite(ms) && ms > 0,
           "{}: {} returned {} ms in {} round {}; a timer must return a finite, positive time",
           name_of(label), callable == kWork ? std::string("the work") : fmt::format("probe {}", callable),
           ms, phase, round);
  return ms;
}

void check_options(const TimerFn& work, const std::vector<TimerFn>& probes,
                   const std::vector<double>& reference_ms, const InterleavedOptions& o) {
  const std::string name = name_of(o.label);
  ES_CHECK(static_cast<bool>(work), "{}: no work to time", name);
  ES_CHECK(!probes.empty(), "{}: at least one probe is needed", name);
  ES_CHECK(reference_ms.size() == probes.size(), "{}: {} references for {} probes", name,
           reference_ms.size(), probes.size());
  for (size_t i = 0; i < probes.size(); ++i) {
    ES_CHECK(static_cast<bool>(probes[i]), "{}: probe {} is empty", name, i);
    ES_CHECK(std::isfinite(reference_ms[i]) && reference_ms[i] > 0,
             "{}: probe {}'s reference is {} ms, must be finite and positive", name, i,
             reference_ms[i]);
  }
  ES_CHECK(o.warmup_rounds >= 0, "{}: warmup_rounds = {}", name, o.warmup_rounds);
  ES_CHECK(o.min_rounds >= 1 && o.max_rounds >= o.min_rounds,
           "{}: min_rounds = {}, max_rounds = {} (need 1 <= min <= max)", name, o.min_rounds,
           o.max_rounds);
  ES_CHECK(o.target_relative_half_width > 0, "{}: target_relative_half_width = {}", name,
           o.target_relative_half_width);
  ES_CHECK(o.confidence > 0 && o.confidence < 1, "{}: confidence = {} must lie in (0, 1)", name,
           o.confidence);
  ES_CHECK(o.max_ratio > 1, "{}: max_ratio = {} must exceed 1", name, o.max_ratio);
  ES_CHECK(o.probe_drift_bound > 1, "{}: probe_drift_bound = {} must exceed 1", name,
           o.probe_drift_bound);
  ES_CHECK(o.drift_retries >= 0 && o.drift_retry_pause_ms >= 0,
           "{}: drift_retries = {}, drift_retry_pause_ms = {} (need >= 0)", name, o.drift_retries,
           o.drift_retry_pause_ms);
}

// One round's times: the work and each probe, run in `order`.
struct RoundTimes {
  double work_ms = 0;
  std::vector<double> probe_ms;
};

RoundTimes run_round(const TimerFn& work, const std::vector<TimerFn>& probes,
                     const std::vector<int>& order, const std::string& label, int round,
                     const char* phase) {
  RoundTimes t;
  t.probe_ms.assign(probes.size(), 0.0);
  for (int callable : order) {
    if (callable == kWork) {
      t.work_ms = checked_time(work, label, kWork, round, phase);
    } else {
      t.probe_ms[callable] = checked_time(probes[callable], label, callable, round, phase);
    }
  }
  return t;
}

double geometric_mean(std::span<const double> values) {
  if (values.size() == 1) return values[0];  // exact, not exp(log(x))
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

// The orders of one block's rounds: the work once in every position, the
// probes shuffled into the others.
std::vector<std::vector<int>> block_orders(int probes, Draws& draws) {
  const int slots = probes + 1;
  std::vector<int> work_position(slots);
  std::iota(work_position.begin(), work_position.end(), 0);
  draws.shuffle(work_position);
  std::vector<std::vector<int>> orders;
  for (int round = 0; round < slots; ++round) {
    std::vector<int> probe_order(probes);
    std::iota(probe_order.begin(), probe_order.end(), 0);
    draws.shuffle(probe_order);
    std::vector<int> order;
    for (int slot = 0, next = 0; slot < slots; ++slot) {
      order.push_back(slot == work_position[round] ? kWork : probe_order[next++]);
    }
    orders.push_back(std::move(order));
  }
  return orders;
}

// Every probe's median over the measurement near its reference. One round
// may be slow beyond any bound (a neighbour's burst, a page reclaim); a median
// that is means the reference no longer describes the machine, at least for
// now. Returns the error's text, empty when every probe is within bounds.
std::string drift_error(const std::vector<std::vector<double>>& probe_runs,
                        const std::vector<double>& reference_ms, const InterleavedOptions& o) {
  for (size_t i = 0; i < probe_runs.size(); ++i) {
    const double low = reference_ms[i] / o.probe_drift_bound;
    const double high = reference_ms[i] * o.probe_drift_bound;
    const double m = median(probe_runs[i]);
    if (m >= low && m <= high) continue;
    return fmt::format(
        "{}: probe {} took a median {} ms over {} rounds, outside [{}, {}] ms (reference {} ms, "
        "drift bound {}x)",
        name_of(o.label), i, m, probe_runs[i].size(), low, high, reference_ms[i],
        o.probe_drift_bound);
  }
  return {};
}

// Sanity of a timed round: the ratio of work to probe.
void check_round(const RoundTimes& t, double probe_figure_ms, const InterleavedOptions& o,
                 int round) {
  const double ratio = t.work_ms / probe_figure_ms;
  ES_CHECK(ratio >= 1.0 / o.max_ratio && ratio <= o.max_ratio,
           "{}: work/probe ratio {} in round {} (work {} ms, probe {} ms) is outside [{}, {}]: a "
           "broken timer, or a probe of another order of magnitude than the work",
           name_of(o.label), ratio, round, t.work_ms, probe_figure_ms, 1.0 / o.max_ratio,
           o.max_ratio);
}

struct BlockSummary {
  MedianInterval interval;
  double median = 0;
  double relative_half_width = 0;
};

BlockSummary summarize(const std::vector<double>& block_ratios, double confidence) {
  BlockSummary s;
  s.median = median(block_ratios);
  s.interval = median_confidence_interval(block_ratios, confidence);
  s.relative_half_width = (s.interval.high - s.interval.low) / 2.0 / s.median;
  return s;
}

// One measurement: warm-up, then whole blocks until the interval is narrow
// enough or the cap is hit. Fills the per-round and per-block figures of `r`
// and the probes' runs.
void measure_once(const TimerFn& work, const std::vector<TimerFn>& probes,
                  const InterleavedOptions& options, InterleavedResult& r,
                  std::vector<std::vector<double>>& probe_runs) {
  const int probe_count = static_cast<int>(probes.size());
  const int block_rounds = probe_count + 1;
  // Whole blocks only: a partial block would bring back the position effect.
  const int min_blocks = (options.min_rounds + block_rounds - 1) / block_rounds;
  const int max_blocks = (options.max_rounds + block_rounds - 1) / block_rounds;

  Draws warmup_draws(item_seed(options.seed, kWarmupStream));
  for (int round = 0; round < options.warmup_rounds; ++round) {
    std::vector<int> order(block_rounds);
    std::iota(order.begin(), order.end(), kWork);
    warmup_draws.shuffle(order);
    run_round(work, probes, order, options.label, round, "warm-up");
  }

  probe_runs.assign(probe_count, {});
  Draws block_draws(item_seed(options.seed, kBlockStream));
  for (int block = 0; block < max_blocks; ++block) {
    double block_log_ratio = 0;
    for (const std::vector<int>& order : block_orders(probe_count, block_draws)) {
      const RoundTimes t = run_round(work, probes, order, options.label, r.rounds, "timed");
      const double probe_figure_ms = geometric_mean(t.probe_ms);
      check_round(t, probe_figure_ms, options, r.rounds);
      for (int i = 0; i < probe_count; ++i) probe_runs[i].push_back(t.probe_ms[i]);
      r.work_ms.push_back(t.work_ms);
      r.probe_ms.push_back(probe_figure_ms);
      r.ratios.push_back(t.work_ms / probe_figure_ms);
      block_log_ratio += std::log(r.ratios.back());
      ++r.rounds;
    }
    r.block_ratios.push_back(std::exp(block_log_ratio / block_rounds));
    if (block + 1 < min_blocks) continue;
    const BlockSummary s = summarize(r.block_ratios, options.confidence);
    if (s.interval.coverage >= options.confidence &&
        s.relative_half_width <= options.target_relative_half_width) {
      r.converged = true;
      break;
    }
  }
}

}  // namespace

InterleavedResult measure_interleaved(const TimerFn& work, const std::vector<TimerFn>& probes,
                                      const std::vector<double>& reference_ms,
                                      const InterleavedOptions& options) {
  check_options(work, probes, reference_ms, options);
  InterleavedResult r;
  std::vector<std::vector<double>> probe_runs;
  // A probe past its drift bound throws the measurement away: a burst of a
  // neighbour can hold the machine for seconds, so it is measured again after
  // a pause (doubling), and only a drift that outlasts every try is an error.
  int retries = 0;
  for (double pause_ms = options.drift_retry_pause_ms;; pause_ms *= 2) {
    r = InterleavedResult{};
    measure_once(work, probes, options, r, probe_runs);
    const std::string drift = drift_error(probe_runs, reference_ms, options);
    if (drift.empty()) break;
    ES_CHECK(retries < options.drift_retries,
             "{}{}: the machine is not the one the reference describes", drift,
             retries == 0 ? std::string()
                          : fmt::format(" (measured {} times, the last {} after a pause)",
                                        retries + 1, retries));
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(pause_ms));
    ++retries;
  }
  r.drift_retries = retries;
  r.reference_ms = geometric_mean(reference_ms);
  const BlockSummary s = summarize(r.block_ratios, options.confidence);
  r.ratio_median = s.median;
  r.ratio_ci_low = s.interval.low;
  r.ratio_ci_high = s.interval.high;
  r.ratio_ci_coverage = s.interval.coverage;
  r.relative_half_width = s.relative_half_width;
  r.dispersion = median_absolute_deviation(r.block_ratios) / s.median;
  r.normalized_ms = r.ratio_median * r.reference_ms;
  r.raw_ms = median(r.work_ms);
  r.probe_median_ms = median(r.probe_ms);
  return r;
}

// Why a low quantile: slow phases only ever add time, so the machine's quiet
// state is the fast end of the distribution and the stable figure; a median
// taken while a slow phase happens to run at start-up would be up to 1.6-1.8x
// the quiet time, and the whole file's scale would depend on that luck. Why
// not the minimum: it is the most extreme order statistic, set by a single
// lucky run (timer granularity, a frequency burst, caches left warm) and it
// keeps falling as runs are added, so references of runs of different lengths
// would disagree; the 15th percentile is an interior order statistic whose
// error shrinks like 1/sqrt(runs), and it stays in the quiet phase as long as
// more than about 15% of the runs are quiet, which is what the time window
// (options) is for. The price, a reference a little
// below the quiet median (about one noise sigma), is one constant factor on
// every normalized figure of the file, so comparisons within it are unaffected.
ProbeReference estimate_probe_reference(const TimerFn& probe, const ProbeReferenceOptions& options) {
  const std::string name = name_of(options.label);
  ES_CHECK(static_cast<bool>(probe), "{}: no probe to time", name);
  ES_CHECK(options.warmup_runs >= 0 && options.min_runs >= 1 &&
               options.max_runs >= options.min_runs && options.min_window_ms >= 0,
           "{}: warmup_runs = {}, min_runs = {}, max_runs = {}, min_window_ms = {} (need >= 0, "
           ">= 1, >= min_runs, >= 0)",
           name, options.warmup_runs, options.min_runs, options.max_runs, options.min_window_ms);
  ES_CHECK(options.quantile >= 0 && options.quantile <= 1, "{}: quantile = {} must lie in [0, 1]",
           name, options.quantile);
  for (int run = 0; run < options.warmup_runs; ++run) {
    checked_time(probe, options.label, 0, run, "reference warm-up");
  }
  ProbeReference ref;
  while (static_cast<int>(ref.run_ms.size()) < options.max_runs &&
         (static_cast<int>(ref.run_ms.size()) < options.min_runs ||
          ref.window_ms < options.min_window_ms)) {
    const int run = static_cast<int>(ref.run_ms.size());
    ref.run_ms.push_back(checked_time(probe, options.label, 0, run, "reference"));
    ref.window_ms += ref.run_ms.back();
  }
  ref.reference_ms = quantile(ref.run_ms, options.quantile);
  ref.median_ms = median(ref.run_ms);
  ref.dispersion = median_absolute_deviation(ref.run_ms) / ref.median_ms;
  return ref;
}

json interleaved_summary_json(const InterleavedResult& r) {
  json j = {{"raw_ms", r.raw_ms},
            {"probe_ms", r.probe_median_ms},
            {"ratio_median", r.ratio_median},
            {"ratio_ci", {r.ratio_ci_low, r.ratio_ci_high}},
            {"ratio_ci_coverage", r.ratio_ci_coverage},
            {"ratio_mad", r.dispersion},
            {"rounds", r.rounds},
            {"converged", r.converged},
            {"normalized_ms", r.normalized_ms}};
  if (r.drift_retries > 0) j["drift_retries"] = r.drift_retries;
  return j;
}

json interleaved_rounds_json(const InterleavedResult& r) {
  return {{"work_ms", r.work_ms},
          {"probe_ms", r.probe_ms},
          {"ratios", r.ratios},
          {"block_ratios", r.block_ratios}};
}

json probe_reference_json(const ProbeReference& reference, const ProbeReferenceOptions& options) {
  return {{"reference_ms", reference.reference_ms},
          {"reference_quantile", options.quantile},
          {"median_ms", reference.median_ms},
          {"dispersion", reference.dispersion},
          {"runs", static_cast<int>(reference.run_ms.size())},
          {"window_ms", reference.window_ms}};
}

ProbeReference probe_reference_from_json(const json& root, const std::string& pointer,
                                         const std::string& path) {
  json_field(root, pointer, JsonKind::kObject, path);
  const auto number = [&](const char* key, double absent) {
    const json* v = json_optional(root, pointer + key, JsonKind::kNumber, path);
    return v ? v->get<double>() : absent;
  };
  ProbeReference r;
  r.reference_ms =
      json_field(root, pointer + "/reference_ms", JsonKind::kNumber, path).get<double>();
  r.median_ms = number("/median_ms", r.reference_ms);
  r.dispersion = number("/dispersion", 0.0);
  r.window_ms = number("/window_ms", 0.0);
  ES_CHECK(std::isfinite(r.reference_ms) && r.reference_ms > 0,
           "{}: field '{}/reference_ms' is {}, must be a positive number", path, pointer,
           r.reference_ms);
  return r;
}

}  // namespace embshard
