// The model and policy directories the directory targets fuzz one file of:
// small networks (a few hundred bytes of weights) written by the same
// writers as real ones, so that a fuzzed manifest finds its weight files and
// a fuzzed weight file its manifest. make_seeds.cpp writes the seeds from
// the same functions.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/eval/train_policy.h"
#include "embshard/search/policy.h"
#include "embshard/util/file.h"

namespace embshard::fuzz {

// The CRC an old manifest holds for every weight file (that of any string
// followed by its own CRC): accepted for any intact file, so a weight file
// the fuzzer changed is still read past the manifest's check.
constexpr uint32_t kAnyWeightsCrc = 0x2144df1c;

inline Mlp small_mlp(const std::vector<int>& sizes, bool relu_last, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0, 0.3f);
  Mlp mlp;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    DenseLayer l;
    l.in = sizes[i];
    l.out = sizes[i + 1];
    l.relu = i + 2 < sizes.size() || relu_last;
    for (int k = 0; k < l.in * l.out; ++k) l.weight.push_back(n(rng));
    for (int k = 0; k < l.out; ++k) l.bias.push_back(n(rng));
    mlp.layers.push_back(l);
  }
  return mlp;
}

inline NeuralModel small_neural_model() {
  std::mt19937_64 rng(7);
  NeuralModel m;
  m.batch_size = 512;
  m.max_batch_size = 2048;
  m.comm_batch_size = m.comm_max_batch_size = 1024;
  const int nf = static_cast<int>(compute_feature_names().size());
  m.compute.features.mean.assign(nf, 0.5f);
  m.compute.features.scale.assign(nf, 0.7f);
  m.compute.features.clamp = 6;
  m.compute.table = small_mlp({nf, 3, 2}, true, rng);
  m.compute.head = small_mlp({2, 2, 1}, false, rng);
  m.compute.target_mean = -1;
  m.compute.target_std = 0.8;
  m.has_comm = true;
  for (auto* net : {&m.comm_fwd, &m.comm_bwd}) {
    const int n = static_cast<int>(net == &m.comm_fwd ? comm_fwd_feature_names().size()
                                                      : comm_bwd_feature_names().size());
    net->features.mean.assign(n, 0.1f);
    net->features.scale.assign(n, 0.5f);
    net->mlp = small_mlp({n, 2, 1}, false, rng);
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

}  // namespace embshard::fuzz
