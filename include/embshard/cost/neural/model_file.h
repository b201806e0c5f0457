// A neural cost model as data: its networks, what they were trained on, and
// the directory that holds them (manifest.json + one checksummed weight file
// per network).
//
// Compute (NeuroShard's structure): each table's features -> per-table MLP
// -> exp -> sum over the shard's tables -> log -> head MLP -> the normalised
// log of the shard's milliseconds. The sum makes the model serve any number
// of tables, and lets inference cache each table's exp'd MLP output: a
// shard's cost is a sum of cached vectors plus one small head MLP. Summing
// exp'd outputs (a log-sum-exp per channel) rather than raw ReLU outputs
// lets a channel carry a table's log cost, which then adds up exactly: costs
// span five decades, which a ReLU MLP fits poorly on a linear scale.
//
// Communication (beyond NeuroShard): ONE model per direction serves any device
// count. Each device is described by its own dim sum and delay plus
// reductions over the other devices (sum, max, mean, min of dim sums, max
// delay) and the device count; the MLP maps that to the device's log ms.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/mlp.h"

namespace embshard {

struct ComputeNet {
  Normaliser features;                     // per-table features
  int reuse_tail_bin = kNoReuseTail;       // compute_raw_features' (manifest: absent = none)
  bool data_type_feature = true;           // manifest: its features' names say
  Mlp table;                               // per-table MLP (linear output)
  Mlp head;                                // log(sum of exp(table outputs)) -> normalised log ms
  double target_mean = 0, target_std = 1;  // log ms = y * target_std + target_mean
  ComputeFeatureSet inputs() const { return {reuse_tail_bin, data_type_feature}; }
};

struct CommNet {
  Normaliser features;
  Mlp mlp;
  double target_mean = 0, target_std = 1;
};

struct NeuralModel {
  // The batches the data covered: the networks take the batch as an input
  // and predict any batch in [batch_size, max_batch_size] directly.
  int64_t batch_size = 0, max_batch_size = 0;            // compute data
  int64_t comm_batch_size = 0, comm_max_batch_size = 0;  // comm data (0: no comm model)
  ComputeNet compute;
  bool has_comm = false;
  CommNet comm_fwd, comm_bwd;
  // The largest straggler delay in the comm training data: the networks see
  // delays clipped to [0, this] (comm_network_delays).
  double comm_max_delay_ms = 0;
  // A fitted model's correction for the batch (embshard fit): compute costs
  // are multiplied by (batch / batch_size)^batch_correction. 0: none.
  double batch_correction = 0;
  // The memory bandwidth of the hardware the model predicts for (the
  // manifest's "memory": a large copy's bytes read plus written per second,
  // 1e9, and where the figure comes from); 0: unknown. Physical floors
  // (cost/floor.h) divide by it.
  double copy_gbps = 0;
  std::string copy_source;
  // Everything else the manifest says (data files, machine, options, accuracy).
  nlohmann::json info = nlohmann::json::object();
};

// A model directory: manifest.json + one weight file per network.
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kManifestFormat = "embshard-neural-cost-model";
// 2: forward = wait + network; 3: distinct rows from bin 0 of the histograms
// (estimate_distinct_rows), trained on several batches (max_batch_size).
constexpr int kManifestVersion = 3;

// Writes the weight files and then the manifest, each atomically.
void save_neural_model(const NeuralModel& model, const std::string& dir);
// Validates everything (format, version, feature names, layer sizes,
// checksums, finite weights); Error names the file at fault. `dir` may be a
// model set directory holding the model in neural/.
NeuralModel load_neural_model(const std::string& dir);

// The weight file format and the manifest pieces that name it, shared with
// the other model directories (the placement policies, search/policy.h):
// mlp_entry writes `dir`/`file` atomically and returns its manifest entry
// {"file", "sizes", "crc32"}; mlp_from reads back the entry at `pointer`
// (a JSON pointer, "/networks/policy_table") of `manifest`, the JSON of the
// file at `manifest_path`, checking its fields, the weight file's existence,
// sizes, checksum and finite weights (Error names the file or the field).
nlohmann::json mlp_entry(const std::string& dir, const std::string& file, const Mlp& mlp);
Mlp mlp_from(const std::string& dir, const nlohmann::json& manifest, const std::string& pointer,
             const std::string& manifest_path);
nlohmann::json normaliser_json(const Normaliser& n);
// The normaliser at `pointer` of `manifest`; Error (naming `where` and the
// field) unless it holds `features` finite means and scales.
Normaliser normaliser_from(const nlohmann::json& manifest, const std::string& pointer,
                           size_t features, const std::string& where);

// CRC-32 of a file's bytes (zlib), for the manifest's data file hashes.
uint32_t file_crc32(const std::string& path);

}  // namespace embshard
