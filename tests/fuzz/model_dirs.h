// The model and policy directories the directory targets fuzz one file of:
// small networks (a few hundred bytes of weights) written by the same
// writers as real ones, so that a fuzzed manifest finds its weight files and
// a fuzzed weight file its manifest. make_seeds.cpp writes the seeds from
// the same functions.
#pragma once

#include <array>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/eval/train_policy.h"
#include "embshard/search/policy.h"
#include "embshard/util/file.h"
#include "../cost/cost_test_util.h"

namespace embshard::fuzz {

// The CRC an old manifest holds for every weight file (that of any string
// followed by its own CRC): accepted for any intact file, so a weight file
// the fuzzer changed is still read past the manifest's check.
constexpr uint32_t kAnyWeightsCrc = 0x2144df1c;

using testing::random_mlp;

inline NeuralModel small_neural_model() {
  std::mt19937_64 rng(7);
  NeuralModel m;
  m.batch_size = 512;
  m.max_batch_size = 2048;
  m.comm_batch_size = m.comm_max_batch_size = 1024;
  const int nf = m.compute.inputs().size();
  m.compute.features.mean.assign(nf, 0.5f);
  m.compute.features.scale.assign(nf, 0.7f);
  m.compute.features.clamp = 6;
  m.compute.table = random_mlp({nf, 3, 2}, true, rng);
  m.compute.head = random_mlp({2, 2, 1}, false, rng);
  m.compute.target_mean = -1;
  m.compute.target_std = 0.8;
  m.has_comm = true;
  for (auto* net : {&m.comm_fwd, &m.comm_bwd}) {
    const int n = static_cast<int>(net == &m.comm_fwd ? comm_fwd_feature_names().size()
                                                      : comm_bwd_feature_names().size());
    net->features.mean.assign(n, 0.1f);
    net->features.scale.assign(n, 0.5f);
    net->mlp = random_mlp({n, 2, 1}, false, rng);
  }
  m.comm_max_delay_ms = 2;
  return m;
}

inline PolicyNets small_policy(PolicyKind kind) { return untrained_policy(kind, 3, 2, 5); }

// Sets every "crc32" of `manifest`'s networks (at any depth) to kAnyWeightsCrc.
inline void accept_any_weights(nlohmann::json& j) {
  if (j.is_object()) {
    for (auto& [key, value] : j.items()) {
      if (key == "crc32") value = kAnyWeightsCrc;
      accept_any_weights(value);
    }
  }
}

inline void rewrite_manifest_accepting_any_weights(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  nlohmann::json manifest = nlohmann::json::parse(read_file(path));
  accept_any_weights(manifest["networks"]);
  write_file_atomic(path, manifest.dump(2) + "\n");
}

// The weight files of each directory, by kind.
inline const std::vector<std::string>& neural_weight_files() {
  static const std::vector<std::string> files = {"compute_table.bin", "compute_head.bin",
                                                 "comm_fwd.bin", "comm_bwd.bin"};
  return files;
}
inline std::vector<std::string> policy_weight_files(PolicyKind kind) {
  if (kind == PolicyKind::kAutoShard) {
    return {"policy_table.bin", "policy_logit.bin", "gru_ih.bin", "gru_hh.bin"};
  }
  return {"policy_table.bin", "policy_logit.bin", "cost_table.bin", "cost_compute.bin",
          "cost_fwd_comm.bin", "cost_bwd_comm.bin", "cost_overall.bin"};
}

// What planning asks of a cost model: a table's compute and an all-to-all.
inline void cost_a_shard(const CostModel& model) {
  TableFeatures t;
  t.rows = 100000;
  t.dim = 64;
  t.pooling_factor = 12;
  t.row_reuse[1] = t.lookup_reuse[1] = 1;
  model.compute->compute_ms(std::array<int, 1>{model.compute->add_table(t)});
  const std::array<double, 3> dims = {128, 64, 0}, delays = {0, 0.5, 1};
  std::array<double, 3> fwd{}, bwd{};
  model.comm->comm_ms(dims, delays, fwd, bwd);
}

}  // namespace embshard::fuzz
