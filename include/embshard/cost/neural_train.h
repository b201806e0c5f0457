// Training the neural cost models with libtorch, and libtorch's forward of
// the same networks (the reference the fast path is checked and timed
// against). Declared here without torch; defined in src/cost/*_torch.cpp,
// available when EMBSHARD_WITH_TORCH is defined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural_model.h"

namespace embshard {

struct TrainOptions {
  std::string compute_path;             // bench compute file (required)
  std::vector<std::string> comm_paths;  // bench comm files, any device counts
  std::string unseen_compute_path;      // optional: a bench compute file of other tables
  uint64_t seed = 0;
  double holdout_tables = 0.1;                 // share of the pool's tables kept out of training
  double val_share = 0.15, test_share = 0.15;  // of the records (per file)
  int max_epochs = 400;
  int patience = 40;  // epochs without a better validation loss before stopping
  int batch = 32;     // records per step
  double lr = 3e-3;
  double weight_decay = 1e-5;
  int hidden = 64;      // width of hidden layers
  int embed = 32;       // per-table MLP output width
  int threads = 1;      // torch intra-op threads (1: deterministic and quiet)
  bool verbose = true;  // progress lines on stderr
};

// Which records of a compute file go where. Tables are held out by pool id:
// records made only of held-out tables form `unseen`; records mixing both are
// dropped (they would leak held-out tables into no split cleanly).
struct ComputeSplit {
  std::vector<int> train, val, test, unseen;
  std::vector<int> holdout_pool_ids;
  int64_t dropped_mixed = 0;
};
ComputeSplit split_compute_records(const ComputeData& data, uint64_t seed, double holdout_tables,
                                   double val_share, double test_share);
// Records of comm files split by sample (per file, seeded).
struct CommSplit {
  std::vector<std::pair<int, int>> train, val, test;  // (file, record)
};
CommSplit split_comm_records(const std::vector<CommData>& files, uint64_t seed, double val_share,
                             double test_share);

struct TrainResult {
  NeuralModel model;                    // model.info holds the manifest extras and the figures
  std::vector<Comparison> comparisons;  // test splits, for the report
  std::vector<std::string> notes;       // split sizes, stopping epochs, skipped records
};

// Trains, evaluates on the held-out splits and returns the model (not saved).
TrainResult train_neural_model(const TrainOptions& options);

// libtorch modules built from `model`'s weights.
class TorchComputeReference {
 public:
  explicit TorchComputeReference(const NeuralModel& model);
  ~TorchComputeReference();
  int add_table(const TableFeatures& table);
  // One module forward per call (the per-shard libtorch path).
  double compute_ms(std::span<const int> table_ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
void torch_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                   std::span<const double> delays_ms, std::span<double> fwd_ms,
                   std::span<double> bwd_ms);

}  // namespace embshard
