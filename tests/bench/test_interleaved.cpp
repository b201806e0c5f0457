// Interleaved timing on a simulated shared machine: no real timing, fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "embshard/measure/interleaved.h"
#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/statistics.h"
#include "test_util.h"

namespace embshard {
namespace {

struct MachineOptions {
  double slow_factor = 1.6;
  // Each call switches between quiet and slow with probability 1 / this, so
  // phases last this many calls on average; 0 keeps the machine quiet.
  double mean_phase_calls = 16;
  double noise = 0.02;               // sd of the multiplicative log-noise per call
  double second_call_factor = 1.0;   // the second call of every pair is this much slower
  uint64_t seed = 1;
};

// A shared machine as the timers see it: every call advances it by one call
// and returns base_ms x (its speed factor) x noise.
class SimMachine {
 public:
  explicit SimMachine(MachineOptions o) : o_(o) { slow_ = draw() < 0.5; }

  double run(double base_ms) {
    if (o_.mean_phase_calls > 0 && draw() < 1.0 / o_.mean_phase_calls) slow_ = !slow_;
    // Uniform with sd `noise` in log space: bounded, so no seed hits a freak value.
    const double log_noise = o_.noise * std::sqrt(3.0) * (2 * draw() - 1);
    const double position = calls_ % 2 == 1 ? o_.second_call_factor : 1.0;
    ++calls_;
    return base_ms * (slow_ ? o_.slow_factor : 1.0) * position * std::exp(log_noise);
  }
  TimerFn timer(double base_ms) {
    return [this, base_ms] { return run(base_ms); };
  }
  int64_t calls() const { return calls_; }

 private:
  double draw() { return (static_cast<double>(item_seed(o_.seed, draws_++) >> 11) + 0.5) * 0x1.0p-53; }

  MachineOptions o_;
  bool slow_ = false;
  int64_t calls_ = 0;
  uint64_t draws_ = 0;
};

constexpr double kWorkMs = 40, kProbeMs = 10;

InterleavedOptions seeded(uint64_t seed) {
  InterleavedOptions o;
  o.seed = seed;
  o.label = "sample 17";
  o.drift_retry_pause_ms = 0;
  return o;
}

double relative_error(double value, double truth) { return std::abs(value / truth - 1); }

TEST(Interleaved, NormalizedCostStaysNearTruthWhereRawMedianDoesNot) {
  double worst_normalized = 0, worst_raw = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SimMachine machine({.seed = seed});
    const InterleavedResult r = measure_interleaved(machine.timer(kWorkMs), {machine.timer(kProbeMs)},
                                                    {kProbeMs}, seeded(seed));
    EXPECT_DOUBLE_EQ(r.normalized_ms, r.ratio_median * kProbeMs);
    EXPECT_LE(r.ratio_ci_low, r.ratio_median);
    EXPECT_GE(r.ratio_ci_high, r.ratio_median);
    EXPECT_EQ(machine.calls(), 2 * (r.rounds + 2)) << "one run of each per round, 2 warm-ups";
    worst_normalized = std::max(worst_normalized, relative_error(r.normalized_ms, kWorkMs));
    worst_raw = std::max(worst_raw, relative_error(r.raw_ms, kWorkMs));
  }
  EXPECT_LT(worst_normalized, 0.03);
  // The machine is as bad as the real one: some sample's raw median is off
  // by most of the slow factor (1.6x).
  EXPECT_GT(worst_raw, 0.4);
  EXPECT_LT(worst_raw, 0.7);
}

struct ReferenceErrors {
  double worst_reference = 0, worst_median = 0;
};

ReferenceErrors reference_errors(const ProbeReferenceOptions& o) {
  ReferenceErrors e;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SimMachine machine({.seed = 1000 + seed});
    const ProbeReference ref = estimate_probe_reference(machine.timer(kProbeMs), o);
    EXPECT_EQ(machine.calls(), o.warmup_runs + static_cast<int64_t>(ref.run_ms.size()));
    EXPECT_DOUBLE_EQ(ref.reference_ms, quantile(ref.run_ms, o.quantile));
    e.worst_reference = std::max(e.worst_reference, relative_error(ref.reference_ms, kProbeMs));
    e.worst_median = std::max(e.worst_median, relative_error(ref.median_ms, kProbeMs));
  }
  return e;
}

TEST(Interleaved, ProbeReferenceIsTheQuietTimeGivenAWideWindow) {
  ProbeReferenceOptions o;  // 20 s of probe runs: some 2,000 runs, 120 phases
  o.label = "probe memcpy";
  const ReferenceErrors wide = reference_errors(o);
  // Slightly below the quiet time (noise), never a slow-phase figure...
  EXPECT_LT(wide.worst_reference, 0.05);
  // ...which the median is for some seeds.
  EXPECT_GT(wide.worst_median, 0.3);

  // 60 runs span about 4 phases: some windows are nearly all slow.
  o.min_runs = 60;
  o.min_window_ms = 0;
  const ReferenceErrors narrow = reference_errors(o);
  EXPECT_GT(narrow.worst_reference, 0.4);

  SimMachine machine({.seed = 1});
  const ProbeReference ref = estimate_probe_reference(machine.timer(kProbeMs), {});
  EXPECT_GE(ref.window_ms, 20000);
  EXPECT_LT(ref.window_ms, 20000 + 2 * kProbeMs);  // stops as soon as the window is full
  EXPECT_GT(ref.dispersion, 0.005);
}

TEST(Interleaved, EndToEndWithEstimatedReference) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SimMachine machine({.seed = 5000 + seed});
    const ProbeReference ref = estimate_probe_reference(machine.timer(kProbeMs), {});
    const InterleavedResult r = measure_interleaved(
        machine.timer(kWorkMs), {machine.timer(kProbeMs)}, {ref.reference_ms}, seeded(seed));
    EXPECT_LT(relative_error(r.normalized_ms, kWorkMs), 0.06) << "seed " << seed;
  }
}

TEST(Interleaved, QuietMachineStopsAtMinRounds) {
  SimMachine machine({.mean_phase_calls = 0, .noise = 0.002, .seed = 7});
  const InterleavedResult r =
      measure_interleaved(machine.timer(kWorkMs), {machine.timer(kProbeMs)}, {kProbeMs}, seeded(7));
  EXPECT_EQ(r.rounds, 12);
  EXPECT_EQ(r.block_ratios.size(), 6u);
  EXPECT_TRUE(r.converged);
  EXPECT_LE(r.relative_half_width, 0.02);
  EXPECT_GE(r.ratio_ci_coverage, 0.95);
  EXPECT_NEAR(r.ratio_median, 4.0, 0.02);
  EXPECT_LT(r.dispersion, 0.005);
}

TEST(Interleaved, TooFewBlocksForTheConfidenceKeepGoing) {
  // Two probes: blocks of 3 rounds, so 12 rounds are 4 blocks, whose
  // [min, max] covers the median only 87.5% of the time; it takes 6 blocks.
  SimMachine machine({.mean_phase_calls = 0, .noise = 0.002, .seed = 8});
  const InterleavedResult r = measure_interleaved(
      machine.timer(kWorkMs), {machine.timer(kProbeMs), machine.timer(25)}, {kProbeMs, 25},
      seeded(8));
  EXPECT_EQ(r.rounds, 18);
  EXPECT_TRUE(r.converged);
  EXPECT_DOUBLE_EQ(r.reference_ms, std::sqrt(kProbeMs * 25));
  EXPECT_NEAR(r.normalized_ms, kWorkMs, 0.01 * kWorkMs);
  EXPECT_NEAR(r.probe_ms[0], std::sqrt(kProbeMs * 25), 0.01 * r.probe_ms[0]);
}

TEST(Interleaved, NoisyMachineUsesMoreRoundsAndReportsTheCap) {
  int more_than_min = 0, converged = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SimMachine machine({.noise = 0.03, .seed = 300 + seed});
    const InterleavedResult r = measure_interleaved(machine.timer(kWorkMs), {machine.timer(kProbeMs)},
                                                    {kProbeMs}, seeded(seed));
    EXPECT_LE(r.rounds, 60);
    if (r.rounds > 12) ++more_than_min;
    if (r.converged) {
      ++converged;
      EXPECT_LE(r.relative_half_width, 0.02);
    }
  }
  EXPECT_EQ(more_than_min, 10);
  EXPECT_GE(converged, 5) << "a moderately noisy machine should mostly converge under the cap";

  SimMachine wild({.mean_phase_calls = 2, .noise = 0.3, .seed = 9});
  const InterleavedResult r =
      measure_interleaved(wild.timer(kWorkMs), {wild.timer(kProbeMs)}, {kProbeMs}, seeded(9));
  EXPECT_EQ(r.rounds, 60);
  EXPECT_FALSE(r.converged);
  EXPECT_GT(r.relative_half_width, 0.02);
  EXPECT_EQ(interleaved_summary_json(r)["converged"], false);
}

TEST(Interleaved, RandomizedBalancedOrderCancelsAPositionEffect) {
  // The second call of every pair is 30% slower. Work-then-probe in a fixed
  // order would read the ratio 30% low; the blocks run each order once.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SimMachine machine({.mean_phase_calls = 0, .noise = 0.01, .second_call_factor = 1.3, .seed = seed});
    const InterleavedResult r = measure_interleaved(machine.timer(kWorkMs), {machine.timer(kProbeMs)},
                                                    {kProbeMs}, seeded(seed));
    EXPECT_LT(relative_error(r.normalized_ms, kWorkMs), 0.015) << "seed " << seed;
    // The per-round ratios sit in two clusters, r x 1.3 and r / 1.3, half each.
    const auto high = std::count_if(r.ratios.begin(), r.ratios.end(), [](double x) { return x > 4.0; });
    EXPECT_EQ(2 * high, static_cast<long>(r.ratios.size())) << "seed " << seed;
    EXPECT_GT(*std::max_element(r.ratios.begin(), r.ratios.end()), 4.0 * 1.2);
  }
  // The same machine measured in a fixed order, for contrast: 1 / 1.3 off.
  SimMachine machine({.mean_phase_calls = 0, .noise = 0.01, .second_call_factor = 1.3, .seed = 1});
  std::vector<double> fixed_order;
  for (int round = 0; round < 12; ++round) {
    const double work = machine.run(kWorkMs);
    fixed_order.push_back(work / machine.run(kProbeMs));
  }
  EXPECT_NEAR(median(fixed_order) * kProbeMs, kWorkMs / 1.3, 0.02 * kWorkMs);
}

TEST(Interleaved, OrderIsSeededAndRandom) {
  auto first_round_work_first = [](uint64_t seed) {
    // A probe that reports its position: it is slower when it runs second.
    SimMachine machine({.mean_phase_calls = 0, .noise = 0, .second_call_factor = 2, .seed = 1});
    InterleavedOptions o = seeded(seed);
    o.warmup_rounds = 0;
    o.min_rounds = o.max_rounds = 40;
    const InterleavedResult r =
        measure_interleaved(machine.timer(kWorkMs), {machine.timer(kProbeMs)}, {kProbeMs}, o);
    std::string pattern;
    for (size_t b = 0; b < r.block_ratios.size(); ++b) pattern += r.ratios[2 * b] < 4.0 ? 'W' : 'P';
    return pattern;
  };
  const std::string a = first_round_work_first(11);
  EXPECT_EQ(a, first_round_work_first(11));
  EXPECT_NE(a, first_round_work_first(12));
  EXPECT_EQ(a.size(), 20u);
  // Not a fixed alternation: both orders open blocks, and not in strict turns.
  EXPECT_NE(a.find('W'), std::string::npos);
  EXPECT_NE(a.find('P'), std::string::npos);
  EXPECT_NE(a.find("WW"), std::string::npos);
  EXPECT_NE(a.find("PP"), std::string::npos);
}

using testing::error_of;

void expect_contains(const std::string& text, const std::vector<std::string>& parts) {
  ASSERT_FALSE(text.empty()) << "no error thrown";
  for (const std::string& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  }
}

TEST(Interleaved, BrokenTimersThrowNamingTheSample) {
  const TimerFn probe = [] { return kProbeMs; };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expect_contains(error_of([&] {
                    measure_interleaved([nan] { return nan; }, {probe}, {kProbeMs}, seeded(1));
                  }),
                  {"sample 17", "the work", "nan", "warm-up"});
  expect_contains(error_of([&] {
                    measure_interleaved([] { return kWorkMs; }, {[] { return 0.0; }}, {kProbeMs},
                                        seeded(1));
                  }),
                  {"sample 17", "probe 0", "returned 0 ms"});
  // Past the warm-ups too.
  int calls = 0;
  expect_contains(error_of([&] {
                    measure_interleaved(
                        [&calls] { return ++calls > 5 ? -std::numeric_limits<double>::infinity() : kWorkMs; },
                        {probe}, {kProbeMs}, seeded(1));
                  }),
                  {"sample 17", "the work", "-inf", "timed round 3"});
  ProbeReferenceOptions ro;
  ro.label = "probe memcpy";
  expect_contains(error_of([&] { estimate_probe_reference([nan] { return nan; }, ro); }),
                  {"probe memcpy", "nan"});
}

TEST(Interleaved, AbsurdRatioThrows) {
  const std::string text = error_of([] {
    measure_interleaved([] { return 1e5; }, {[] { return kProbeMs; }}, {kProbeMs}, seeded(1));
  });
  expect_contains(text, {"sample 17", "ratio 10000", "round 0"});
  // Within the bound (ratio 500 < 1000) it does not.
  const InterleavedResult r =
      measure_interleaved([] { return 5000.0; }, {[] { return kProbeMs; }}, {kProbeMs}, seeded(1));
  EXPECT_DOUBLE_EQ(r.ratio_median, 500);
}

TEST(Interleaved, DriftingProbeThrows) {
  // The probe slows by 10% per call: its median over the measurement ends
  // past 3x its reference.
  int probe_calls = 0;
  const TimerFn drifting = [&probe_calls] { return kProbeMs * (1 + 0.1 * probe_calls++); };
  expect_contains(error_of([&] {
                    measure_interleaved([] { return kWorkMs; }, {drifting}, {kProbeMs}, seeded(1));
                  }),
                  {"sample 17", "probe 0", "median", "reference 10 ms", "drift bound 3x",
                   "measured 4 times"});
  // One slow round alone is not drift.
  int calls = 0;
  const TimerFn one_spike = [&calls] { return ++calls == 7 ? 20 * kProbeMs : kProbeMs; };
  EXPECT_NO_THROW(
      measure_interleaved([] { return kWorkMs; }, {one_spike}, {kProbeMs}, seeded(1)));
  // A reference from a slower machine: the probe runs at a quarter of it.
  expect_contains(error_of([&] {
                    measure_interleaved([] { return kWorkMs; }, {[] { return kProbeMs; }},
                                        {4 * kProbeMs}, seeded(1));
                  }),
                  {"sample 17", "probe 0", "median"});
  // The second of two probes drifting is named as such.
  expect_contains(error_of([&] {
                    measure_interleaved([] { return kWorkMs; },
                                        {[] { return kProbeMs; }, [] { return 100.0; }},
                                        {kProbeMs, 20.0}, seeded(1));
                  }),
                  {"probe 1", "100 ms"});
}

TEST(Interleaved, ABurstPastTheDriftBoundIsMeasuredAgain) {
  // The machine is 20x slower for the first 30 calls of anything (a
  // neighbour's burst), then quiet; the work is 4x the probe throughout.
  int calls = 0;
  auto burst = [&calls](double ms) {
    return [&calls, ms] { return ms * (calls++ < 30 ? 20 : 1); };
  };
  const InterleavedResult r =
      measure_interleaved(burst(kWorkMs), {burst(kProbeMs)}, {kProbeMs}, seeded(1));
  EXPECT_EQ(r.drift_retries, 1);
  EXPECT_DOUBLE_EQ(r.normalized_ms, kWorkMs);
  EXPECT_DOUBLE_EQ(r.raw_ms, kWorkMs);  // the burst's rounds were thrown away
  EXPECT_EQ(interleaved_summary_json(r).at("drift_retries"), 1);
  // Without retries the burst is the error; a quiet measurement records none.
  InterleavedOptions no_retry = seeded(1);
  no_retry.drift_retries = 0;
  calls = 0;
  const std::string text = error_of([&] {
    measure_interleaved(burst(kWorkMs), {burst(kProbeMs)}, {kProbeMs}, no_retry);
  });
  expect_contains(text, {"sample 17", "probe 0", "drift bound 3x"});
  EXPECT_EQ(text.find("measured"), std::string::npos);
  // The burst is over (only the next warm-up round sees it).
  const InterleavedResult quiet =
      measure_interleaved(burst(kWorkMs), {burst(kProbeMs)}, {kProbeMs}, seeded(1));
  EXPECT_EQ(quiet.drift_retries, 0);
  EXPECT_FALSE(interleaved_summary_json(quiet).contains("drift_retries"));
}

TEST(Interleaved, InvalidOptionsThrow) {
  const TimerFn t = [] { return 1.0; };
  InterleavedOptions o = seeded(1);
  EXPECT_THROW(measure_interleaved(t, {}, {}, o), Error);
  EXPECT_THROW(measure_interleaved(t, {t}, {1.0, 2.0}, o), Error);
  EXPECT_THROW(measure_interleaved(t, {t}, {0.0}, o), Error);
  o.min_rounds = 30;
  o.max_rounds = 20;
  EXPECT_THROW(measure_interleaved(t, {t}, {1.0}, o), Error);
  o = seeded(1);
  o.confidence = 1.0;
  EXPECT_THROW(measure_interleaved(t, {t}, {1.0}, o), Error);
  o = seeded(1);
  o.probe_drift_bound = 1.0;
  EXPECT_THROW(measure_interleaved(t, {t}, {1.0}, o), Error);
  o = seeded(1);
  o.drift_retries = -1;
  EXPECT_THROW(measure_interleaved(t, {t}, {1.0}, o), Error);
  ProbeReferenceOptions ro;
  ro.quantile = 1.5;
  EXPECT_THROW(estimate_probe_reference(t, ro), Error);
}

TEST(Interleaved, JsonCarriesTheFigures) {
  SimMachine machine({.seed = 3});
  const InterleavedResult r =
      measure_interleaved(machine.timer(kWorkMs), {machine.timer(kProbeMs)}, {kProbeMs}, seeded(3));
  const nlohmann::json j = interleaved_summary_json(r);
  EXPECT_EQ(j["raw_ms"], r.raw_ms);
  EXPECT_EQ(j["probe_ms"], r.probe_median_ms);
  EXPECT_EQ(j["ratio_median"], r.ratio_median);
  EXPECT_EQ(j["ratio_ci"][0], r.ratio_ci_low);
  EXPECT_EQ(j["ratio_ci"][1], r.ratio_ci_high);
  EXPECT_EQ(j["ratio_mad"], r.dispersion);
  EXPECT_EQ(j["rounds"], r.rounds);
  EXPECT_EQ(j["normalized_ms"], r.normalized_ms);
  const nlohmann::json rounds = interleaved_rounds_json(r);
  EXPECT_EQ(rounds["ratios"].size(), static_cast<size_t>(r.rounds));
  EXPECT_EQ(rounds["block_ratios"].size(), r.block_ratios.size());
  ProbeReferenceOptions ro;
  const ProbeReference ref = estimate_probe_reference(machine.timer(kProbeMs), ro);
  const nlohmann::json h = probe_reference_json(ref, ro);
  EXPECT_EQ(h["reference_ms"], ref.reference_ms);
  EXPECT_EQ(h["reference_quantile"], 0.15);
  EXPECT_EQ(h["runs"], ref.run_ms.size());
  EXPECT_EQ(h["window_ms"], ref.window_ms);
}

}  // namespace
}  // namespace embshard
