// A compute model corrected by measurements: what verification rounds plan
// against after the first (docs/cli.md, `--verify-rounds`). Each measured device
// (a set of pieces, its measured and predicted compute) says by how much the
// model is off on it; the log of that ratio is shared out over the device's
// source tables by their share of its predicted cost (ridge regression, so a
// table seen on one device only is corrected part way), plus one factor for
// all. A set of pieces is then predicted as the base model's figure times
// exp(common + its tables' corrections averaged by their predicted cost).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "embshard/cost/compute_model.h"

namespace embshard {

// One measured device: its pieces' source tables and predicted costs alone
// (the weights), and its measured and predicted compute.
struct MeasuredSet {
  std::vector<int> tables;        // source_table of each piece
  std::vector<double> single_ms;  // each piece alone, predicted
  double measured_ms = 0, predicted_ms = 0;
};

struct ComputeCorrection {
  double common = 0;                           // log factor for every set
  std::unordered_map<int, double> by_table;    // log factor by source table
  int sets = 0;                                // distinct sets it was fitted on
};

// `ridge`: the penalty on each table's log factor, in units of a set's sum
// of squared cost shares (a set of k equal pieces has 1/k). Sets with the
// same tables and weights count once; a set with a non-positive figure is
// an Error naming it.
ComputeCorrection fit_compute_correction(const std::vector<MeasuredSet>& sets, double ridge);

class CorrectedComputeModel : public ComputeModel {
 public:
  CorrectedComputeModel(std::shared_ptr<ComputeModel> base, ComputeCorrection correction);
  std::string name() const override;
  int64_t batch_size() const override { return base_->batch_size(); }
  // Its own ids (0, 1, ...: the base model's may already be taken); a piece
  // whose source table was not measured (or is -1) takes the common factor only.
  int add_table(const TableFeatures& table) override;
  double compute_ms(std::span<const int> table_ids) const override;
  size_t state_size() const override { return base_state_ == 0 ? 0 : base_state_ + 2; }
  void add_to_state(int table_id, std::span<double> state) const override;
  double state_ms(std::span<const double> state) const override;
  std::string far_from_training(const TableFeatures& t) const override {
    return base_->far_from_training(t);
  }

 private:
  void check_id(int id) const;

  std::shared_ptr<ComputeModel> base_;
  ComputeCorrection correction_;
  size_t base_state_;
  // By id: the base model's id, the piece's predicted cost alone and its
  // table's log factor.
  std::vector<int> base_id_;
  std::vector<double> weight_, log_factor_;
};

}  // namespace embshard
