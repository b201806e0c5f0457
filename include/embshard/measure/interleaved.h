// Interleaved timing against a reference probe (duet benchmarking, Bulej et
// al. 2020; randomized multiple interleaved trials, Abedi & Brecht 2017).
//
// A shared machine has slow phases (1.4-1.8x, seconds long) that a median
// over one sample's own runs cannot remove: a sample measured inside a slow
// phase is slow in every run. So the work is timed together with a fixed
// probe whose quiet time (its reference, measured once at the start of a run
// and stored in the output's header) is known; both see the same phase, and
// the ratio work / probe does not depend on it. The normalized cost is
//   normalized_ms = median ratio x reference_ms,
// the work's time on this machine when quiet, in the reference's scale.
//
// Protocol:
// - A round runs the work and every probe once, in a shuffled order.
// - Rounds come in balanced blocks of (probes + 1) rounds: across a block
//   the work runs once in every position of the round, and the probes fill
//   the other positions in random order (seeded). Whatever a position does to
//   a run (the second call of a pair slowed, a cache warmed by the previous
//   call), a multiplicative effect cancels exactly in the block's geometric
//   mean of round ratios, while a plain median over rounds would land in
//   whichever order happened to be drawn more often.
// - The statistic is the median over blocks of the block ratio; its
//   confidence interval comes from order statistics (util/statistics.h).
// - Blocks repeat until the interval's relative half-width reaches the
//   target (with at least the requested coverage) or the round cap is hit.
//
// Several probes: a round's probe figure is the geometric mean of the
// probes' times, and the reference the geometric mean of their references;
// their quotient is then the geometric mean of each probe's slowdown against
// its own reference, so no probe counts for more because it is longer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace embshard {

// One timed run of something, in milliseconds.
using TimerFn = std::function<double()>;

struct InterleavedOptions {
  // Untimed rounds first (caches, page faults, frequency ramp-up). Their
  // times are still checked for being finite and positive, not for drift.
  int warmup_rounds = 2;
  // Rounds, counted one run of each callable per round, and rounded up to
  // whole blocks of (probes + 1) rounds. With one probe the default minimum
  // is 6 blocks: the fewest whose [min, max] covers the median at 95%.
  int min_rounds = 12;
  int max_rounds = 60;
  // Stop once (CI high - CI low) / 2 / median ratio <= this...
  double target_relative_half_width = 0.02;
  // ...for an interval of at least this coverage.
  double confidence = 0.95;
  // Seeds the order of the callables in every round.
  uint64_t seed = 1;
  // Sanity bounds, each a factor > 1. A round's ratio outside
  // [1 / max_ratio, max_ratio] means a broken timer or a probe of another
  // order of magnitude than the work (they would not see the same phase).
  double max_ratio = 1e3;
  // A probe whose median over the measurement lies outside [reference /
  // probe_drift_bound, reference x probe_drift_bound] means the reference no
  // longer describes the machine (another machine, another build, a far
  // heavier load than slow phases); a single slow round does not.
  double probe_drift_bound = 3.0;
  // A measurement whose probe drifted is thrown away and taken again after a
  // pause (drift_retry_pause_ms, doubling each time), at most drift_retries
  // times; a drift that outlasts them all is the error. 0 where every rank of
  // a collective must run the same rounds.
  int drift_retries = 3;
  double drift_retry_pause_ms = 1000;
  // Names the measurement in errors, e.g. "sample 17".
  std::string label;
};

struct InterleavedResult {
  // Per round (rounds entries each).
  std::vector<double> work_ms;   // raw work times
  std::vector<double> probe_ms;  // the round's probe figure (geometric mean over probes)
  std::vector<double> ratios;    // work_ms / probe_ms
  // Per block: the geometric mean of its rounds' ratios (the statistic's samples).
  std::vector<double> block_ratios;
  double reference_ms = 0;        // geometric mean of the probes' references
  double ratio_median = 0;        // median of block_ratios
  double ratio_ci_low = 0, ratio_ci_high = 0;
  double ratio_ci_coverage = 0;   // exact coverage of [low, high] (statistics.h)
  double relative_half_width = 0; // (high - low) / 2 / median
  double dispersion = 0;          // MAD / median of block_ratios
  int rounds = 0;                 // timed rounds, warm-ups excluded
  int drift_retries = 0;          // measurements thrown away for a drifting probe
  bool converged = false;         // reached the target before the cap
  double normalized_ms = 0;       // ratio_median x reference_ms
  double raw_ms = 0;              // median of work_ms (what a plain timer reports)
  double probe_median_ms = 0;     // median of probe_ms
};

// Times `work` interleaved with `probes` (one or more), `reference_ms[i]`
// being probe i's fixed reference. Error naming options.label and the
// callable when a timer returns a non-finite or non-positive time, a round's
// ratio leaves [1/max_ratio, max_ratio], or a probe's median leaves its drift
// bounds in every try; and on invalid options.
InterleavedResult measure_interleaved(const TimerFn& work, const std::vector<TimerFn>& probes,
                                      const std::vector<double>& reference_ms,
                                      const InterleavedOptions& options);

struct ProbeReferenceOptions {
  int warmup_runs = 3;
  // Runs continue until both min_runs are done and their times add up to
  // min_window_ms, or max_runs are done. The window matters more than the
  // count: slow phases last seconds, and a reference taken inside one is
  // 1.4-1.8x the quiet time (the drift bound does not catch that much), so
  // the runs must span several phases for some of them to be quiet.
  int min_runs = 60;
  int max_runs = 100000;
  double min_window_ms = 20000;
  // The quantile of the runs taken as the reference: low, because slow
  // phases only ever slow runs down (see the .cpp for why not the minimum).
  double quantile = 0.15;
  std::string label;  // names the probe in errors
};

struct ProbeReference {
  double reference_ms = 0;  // the `quantile` of run_ms
  double median_ms = 0;
  double dispersion = 0;    // MAD / median of run_ms
  double window_ms = 0;     // sum of run_ms
  std::vector<double> run_ms;
};

// The reference of a probe, measured at the start of a run. Error naming
// options.label when the probe returns a non-finite or non-positive time, and
// on invalid options.
ProbeReference estimate_probe_reference(const TimerFn& probe, const ProbeReferenceOptions& options);

// For a cost record: "raw_ms", "probe_ms" (median of the rounds' probe
// figures), "ratio_median", "ratio_ci" ([low, high]), "ratio_ci_coverage",
// "ratio_mad" (MAD / median of the block ratios, i.e. relative), "rounds",
// "converged", "normalized_ms", and "drift_retries" when there were any.
nlohmann::json interleaved_summary_json(const InterleavedResult& result);
// The per-round figures ("work_ms", "probe_ms", "ratios") and "block_ratios",
// for diagnosing a sample; bulky, so not part of the summary.
nlohmann::json interleaved_rounds_json(const InterleavedResult& result);
// For the output file's header: "reference_ms", "reference_quantile",
// "median_ms", "dispersion", "runs", "window_ms".
nlohmann::json probe_reference_json(const ProbeReference& reference,
                                    const ProbeReferenceOptions& options);
// Back from the object at `pointer` ("/probe/reference") of a header or
// manifest, the JSON of `path` (the runs themselves are not stored). Error
// naming the file and field when one is of another type, or reference_ms
// is missing or not a positive number.
ProbeReference probe_reference_from_json(const nlohmann::json& root, const std::string& pointer,
                                         const std::string& path);

}  // namespace embshard
