// libtorch's forward of the neural cost models' networks: the reference the
// torch-free fast path is checked and timed against. Defined in
// src/cost/neural/reference_torch.cpp (library embshard_torch).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "embshard/cost/compute_model.h"
#include "embshard/cost/neural/model_file.h"

namespace embshard {

// libtorch modules built from `model`'s weights, at the model's own batch.
class TorchComputeReference : public ComputeModel {
 public:
  explicit TorchComputeReference(const NeuralModel& model);
  ~TorchComputeReference() override;
  std::string name() const override { return "libtorch module per shard"; }
  int64_t batch_size() const override;
  int add_table(const TableFeatures& table) override;
  // One module forward per call (the per-shard libtorch path).
  double compute_ms(std::span<const int> table_ids) const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
void torch_comm_ms(const NeuralModel& model, std::span<const double> dim_sums,
                   std::span<const double> delays_ms, std::span<double> fwd_ms,
                   std::span<double> bwd_ms);

}  // namespace embshard
