// Fitting a pre-trained neural model to another machine in minutes: a few
// hundred shards measured there correct the compute network's output by a
// plane in log space, log ms' = a + b log ms + c log(batch / b0) (a
// per-machine scale, sensitivity to the shard's size, and to the batch),
// folded into the network's output normalisation and batch correction, so
// the fitted model is an ordinary model directory; then the networks are
// fine-tuned on the same shards.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embshard/cost/accuracy.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/model_file.h"

namespace embshard {

class Reporter;

struct FitOptions {
  std::string model_dir;                 // the pre-trained model
  std::vector<std::string> data_paths;   // bench compute files measured on the new machine
  // Files that only judge the fit: pools whose tables it never saw. Without
  // them a seeded share of data_paths' records judges (tables shared with
  // the fitted ones, so the fine-tune looks better than it generalizes).
  std::vector<std::string> test_paths;
  double fit_share = 0.6;                // records fitted on; the rest judge the fit
  uint64_t seed = 0;                     // which records go where
  bool raw = false;                      // the records' raw medians (LoadOptions::raw)
};

struct FitResult {
  NeuralModel model;                     // the fitted model (save_neural_model)
  double log_scale = 0, power = 1;       // a, b
  double batch_power = 0;                // c: log ms' = a + b log ms + c log(batch / b0)
  int fit_records = 0, test_records = 0;
  AccuracyFigures before, after;         // on the test records, never fitted on
  AccuracyFigures plane;                 // after the plane alone (= after unless fine-tuned)
  // Of the test records, those with row blocks or replica slices, and the
  // figures on them before and after (count 0: none).
  std::vector<size_t> piece_test_idx;
  AccuracyFigures pieces_before, pieces_after;
  ComputeData data;                      // the records; fit_idx fitted on, test_idx judged
  std::vector<size_t> fit_idx, test_idx;
};

// Fits a, b and c by least squares on the fit records (data_paths', or a
// seeded fit_share of them without test_paths), judges before and after on
// the rest. Error with fewer than 10 records to fit on or 5 to judge.
FitResult fit_neural_model(const FitOptions& options, Reporter& reporter);

// The communication networks fitted to exchanges measured here (bench comm
// files, under mpirun, loaded with load_comm_data): per direction, log ms' = a + b log ms on the
// network's part of the cost (forward: past the wait for the last device's
// start), by least squares over a seeded fit_share of the placements; the
// other placements judge, every device's forward and backward. Folded into
// the networks' output normalisation (exact at the batches the comm data of
// the model covered). Error for a model without comm networks, or with fewer
// than 10 placements to fit on or 5 to judge.
struct CommFitResult {
  double fwd_log_scale = 0, fwd_power = 1, bwd_log_scale = 0, bwd_power = 1;
  int fit_records = 0, test_records = 0;  // placements
  AccuracyFigures before, after;          // both directions, every device of the test placements
};
CommFitResult fit_comm_model(NeuralModel& model, const std::vector<CommData>& files,
                             const FitOptions& options, Reporter& reporter);

// The model's accuracy on the given records of `data` (fit's test records).
AccuracyFigures test_accuracy(const NeuralModel& model, const ComputeData& data,
                              std::span<const size_t> records);

// After the plane: the whole network (per-table and head) trained further on
// the fit records, from the pre-trained weights with an L2 pull back to them,
// full-batch Adam for `epochs`: for a machine that ranks shards differently
// from the training one, which no plane follows. Re-judges `after` on the
// test records. Defined in train_torch.cpp (needs EMBSHARD_WITH_TORCH).
struct FineTuneOptions {
  int epochs = 300;
  double anchor = 1e-2;  // weight of sum (w - w0)^2 in the loss
};
void fine_tune_fitted_model(FitResult& result, const FineTuneOptions& options,
                            Reporter& reporter);
// Error naming the flag for epochs < 1 or an anchor < 0 or not finite
// (before any shard is measured).
void check_fine_tune_options(const FineTuneOptions& options);

}  // namespace embshard
