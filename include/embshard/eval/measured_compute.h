// Compute from the executor, communication from a model: the "measured"
// side of an evaluation in one process. One process cannot run an
// all-to-all, so communication comes from the cost model under test (the
// evaluation reports say so); under mpirun it is measured instead.
#pragma once

#include "embshard/cost/cost_model.h"

namespace embshard {

// Tables are registered with the measured model only: communication depends
// on dim sums and delays, not on table ids.
class MeasuredCompute : public CostModel {
 public:
  MeasuredCompute(CostModel& measured, const CostModel& comm)
      : measured_(measured), comm_(comm) {}
  std::string name() const override { return measured_.name() + " compute"; }
  int64_t batch_size() const override { return measured_.batch_size(); }
  int add_table(const TableFeatures& t) override { return measured_.add_table(t); }
  double compute_ms(std::span<const int> ids) const override {
    return measured_.compute_ms(ids);
  }
  void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
               std::span<double> fwd_ms, std::span<double> bwd_ms) const override {
    comm_.comm_ms(dim_sums, delays_ms, fwd_ms, bwd_ms);
  }

 private:
  CostModel& measured_;
  const CostModel& comm_;
};

}  // namespace embshard
