// A measurement's scale from anchor shards: the same fixed shards measured in
// every run and priced by a cost model, so that files measured in different
// runs, on a busy machine or another one, share the model's scale.
//
// The shard timer (measure/shard_timer.h) cancels drift within a run: each
// shard's figure is its median ratio to a fixed probe. What the probe's ratio
// is worth in milliseconds was one 20-second window of probe runs at the start
// of each file, and two runs' windows moved 10-35% apart on a shared machine;
// a neighbour also slows the probe (DRAM-bound) more or less than the shards.
// Anchors replace the window: a fixed set of shards drawn from two synthetic
// pools (both published profiles, at the run's batch) is measured against the
// same probe, and the probe's worth is taken where the model's predictions of
// the anchors put it:
//
//   reference_ms = exp(median over anchors of log(predicted_ms / ratio))
//
// so a file's costs are in the model's units: a neighbour or another machine
// moves the probe and the anchors alike and the quotient stays. The anchors
// do not depend on the measured workload, so `validate` still sees the
// model's error on the workload (the anchors cannot absorb it), and the
// spread of the anchors' quotients says how well one number describes the
// run. The pools and draws are fixed by a seed: the same anchors in every run
// of a version, priced by whichever model the run names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/measure/shard_timer.h"

namespace embshard {

class Reporter;
struct NeuralModel;

struct AnchorOptions {
  int count = 24;                              // anchors, half from each profile's pool
  int64_t batch_size = 2048;                   // the pools' batch: the measured workload's
  int max_tables = 15;                         // tables per anchor: 1..max_tables
  int64_t mem_cap_bytes = int64_t{128} << 20;  // weight bytes per anchor at most
  std::vector<int> dims = {4, 8, 16, 32, 64, 128, 256};
  int pool_tables = 40;      // tables per synthetic pool
  uint64_t seed = 20261204;  // pools and draws
  ShardTimerOptions timer;   // warm-up, rounds and the probe's options
};

// One anchor: which pool and tables, the model's price, the measured ratio
// to the probe, the raw median and the probe's median beside it.
struct Anchor {
  std::string pool;  // "2021" or "2022": the profile of its pool
  std::vector<ShardTable> tables;
  double weight_bytes = 0;
  double predicted_ms = 0, ratio = 0, raw_ms = 0, probe_ms = 0;
};

// The scale a run's anchors give.
struct AnchorScale {
  std::vector<Anchor> anchors;
  double reference_ms = 0;               // the probe's worth in the model's units
  double spread = 0;                     // MAD of log(predicted / ratio): relative
  double ci_low_ms = 0, ci_high_ms = 0;  // ~95% interval of reference_ms (order statistics)
  std::string model;                     // the model directory that priced them
  double seconds = 0;                    // wall time of the measurement
};

// The reference from anchors' predictions and ratios (the formula above),
// with the spread and interval. Error when they are empty, of different
// lengths, or hold a non-positive or non-finite value.
AnchorScale fit_anchor_scale(std::vector<Anchor> anchors);

// Draws the anchors (pools written to a temporary directory and removed),
// prices them with `model` at options.batch_size, measures each on `timer`'s
// executor against its very probe (the one the file's shards are measured
// against), and fits the scale. Sets no reference on `timer`. Progress to
// `reporter`.
AnchorScale measure_anchor_scale(ShardTimer& timer, const NeuralModel& model,
                                 const std::string& model_dir, const AnchorOptions& options,
                                 Reporter& reporter);

// The scale as a ProbeReference (reference_ms, and the spread as its
// dispersion) for the shard timer.
ProbeReference anchor_probe_reference(const AnchorScale& scale);

// For a file header's "scale": {"method": "anchors", "model", "reference_ms",
// "spread", "ci_ms", "count", "seconds", "anchors": [{pool, tables [[table,
// dim]...], weight_bytes, predicted_ms, ratio, raw_ms, probe_ms}]}.
nlohmann::json anchor_scale_json(const AnchorScale& scale, const AnchorOptions& options);

// A data file's scale against the scale of a model's data, for `validate`
// and `eval`: the probe's worth in the file (anchored or a window's quiet
// time) beside the model's data files' (their geometric mean), and whether
// it moved past their spread (the largest of their dispersions, their
// distance from that mean, and 5%: anchors move a few percent run to run).
struct ScaleCheck {
  std::string method;  // "anchors", "window" (or "" where the file does not say)
  double file_ms = 0, model_ms = 0, model_spread = 0;
  bool moved_past_spread = false;
  std::string text;  // one line saying all of it
};
// `header`: a `bench compute` file's (or one with "probe_reference" and
// "scale" at the top, as eval's); `model_files`: the model's data entries
// (measured_compute_files). Empty where either holds no probe reference.
std::optional<ScaleCheck> check_file_scale(const nlohmann::json& header, const std::string& path,
                                           const nlohmann::json* model_files);

}  // namespace embshard
