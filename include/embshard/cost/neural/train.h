// Training the neural cost models with libtorch. Declared here without torch;
// defined in src/cost/neural/*_torch.cpp, available when EMBSHARD_WITH_TORCH
// is defined.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embshard/cost/accuracy_report.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/cost/neural/split.h"

namespace embshard {

class Reporter;

struct TrainOptions {
  // bench compute files (at least one; any batches: the model takes the batch
  // as an input and serves the range the files cover)
  std::vector<std::string> compute_paths;
  std::vector<std::string> comm_paths;  // bench comm files, any device counts and batches
  // optional: bench compute files of other tables, each an extra never-seen test
  std::vector<std::string> unseen_compute_paths;
  bool raw_ground_truth = false;  // train on the records' raw medians (LoadOptions::raw)
  uint64_t seed = 0;
  double holdout_tables = 0.1;                 // share of the pool's tables kept out of training
  double val_share = 0.15, test_share = 0.15;  // of the records (per file)
  int max_epochs = 400;
  int patience = 40;  // epochs without a better validation loss before stopping
  int batch = 32;     // records per step
  double lr = 3e-3;
  double weight_decay = 1e-5;
  // Decay of the weights' moving average per step (0: off): the average is
  // validated and kept instead of the last step's weights.
  double weight_average = 0.999;
  int hidden = 64;      // width of hidden layers
  int embed = 32;       // per-table MLP output width
  // The reuse bin the histograms' tail is merged into (compute_raw_features);
  // 0: by the data's executor (a GPU's: nothing merged, kNoReuseTail; a CPU's:
  // kDefaultReuseTailBin).
  int reuse_tail_bin = 0;
  int threads = 1;      // torch intra-op threads (1: deterministic and quiet)
  Reporter* reporter = nullptr;  // epochs and stopping points (null: silent)
};

struct TrainResult {
  NeuralModel model;                    // model.info holds the manifest extras and the figures
  std::vector<Comparison> comparisons;  // test splits, for the report
  std::vector<std::string> notes;       // split sizes, stopping epochs, skipped records
};

// A data file's entry in a model's manifest (`data`, and a fitted model's
// `fitted.scale`): its path, crc32, records, machine, executor, batch, ranks,
// and the reference its ground truth was normalized to (`probe`: the model's
// scale, model_reference_scale in measured_model.h).
nlohmann::json data_file_entry(const std::string& path, const nlohmann::json& header,
                               size_t records, size_t skipped);

// The model's memory bandwidth (NeuralModel::copy_gbps, the manifest's
// "memory") from the data files it was made from (`entries`, data_file_entry's):
// the median of the copies their `bench compute` runs measured; none (and
// the manifest's "memory" removed) where no file recorded one.
void set_memory_bandwidth(NeuralModel& model, const nlohmann::json& entries);

// Trains, evaluates on the held-out splits and returns the model (not saved).
TrainResult train_neural_model(const TrainOptions& options);

// After training: held-out accuracy through the production (torch-free)
// inference path into result.comparisons, and the manifest's record of what
// the model was made from into result.model.info.
void evaluate_trained_model(const TrainOptions& options, const ComputeData& compute,
                            const ComputeSplit& split, const std::vector<CommData>& comm,
                            const CommSplit& comm_split, TrainResult& result);

}  // namespace embshard
