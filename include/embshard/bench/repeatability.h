// `embshard bench repeat`: how well ground truth holds still. The same N
// shards (bench compute's draws) are measured in two passes, one after the
// other, in one process with one probe reference; each shard's two figures
// are compared, raw (the medians of its own steps) and normalized (against
// the reference probe), side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/bench/compute.h"

namespace embshard {

class Reporter;

struct RepeatShard {
  int64_t sample = 0;
  int tables = 0;
  double raw_ms[2] = {0, 0}, normalized_ms[2] = {0, 0};
  InterleavedResult rounds[2];  // each pass's timed rounds
};

// Relative differences |a - b| / mean(a, b) over the shards, in percent.
struct AgreementFigures {
  double mean_pct = 0, median_pct = 0, p90_pct = 0, max_pct = 0;
};

struct RepeatResult {
  std::vector<RepeatShard> shards;
  AgreementFigures raw, normalized;
  double reference_ms = 0;
  std::string executor;
  bool keep_rounds = false;  // repeat_json writes each pass's rounds (per_round)
};

// `options` as for bench compute (workload, samples, seed, rounds, executor,
// keep_rounds; out_path is not used). Progress to `reporter`.
RepeatResult run_repeatability(const ComputeBenchOptions& options, Reporter& reporter);
AgreementFigures agreement(const std::vector<RepeatShard>& shards, bool normalized);
std::string repeat_report(const RepeatResult& result, bool per_shard);
nlohmann::json repeat_json(const RepeatResult& result);

// A neighbour for the benchmark: copies `bytes` between two buffers for
// `seconds` (memory bandwidth taken from whoever shares the machine).
void stream_memory(int64_t bytes, double seconds);

}  // namespace embshard
