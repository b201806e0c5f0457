// A small cost model for the planner tests: fused compute is a call overhead
// plus a concave function of the summed per-table work (fusing is cheaper
// than running apart, so costs are not additive), communication grows with
// the dim sum and the forward waits for stragglers. Monotone and subadditive,
// as lower_bound() assumes.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "embshard/cost/cost_model.h"

namespace embshard::testing {

class ToyComputeModel : public ComputeModel {
 public:
  // incremental: offer the search the incremental state (the summed work and
  // the table count); otherwise the search calls compute_ms with every id.
  explicit ToyComputeModel(bool incremental = false) : incremental_(incremental) {}
  std::string name() const override { return "toy"; }
  int64_t batch_size() const override { return 4096; }
  int add_table(const TableFeatures& t) override {
    work_.push_back(1e-3 * t.pooling_factor * t.dim *
                    (1.0 + std::log10(static_cast<double>(t.rows)) / 4));
    return static_cast<int>(work_.size()) - 1;
  }
  double compute_ms(std::span<const int> ids) const override {
    ++calls;
    double s = 0;
    for (int id : ids) s += work_.at(id);
    return 0.05 + std::pow(s, 0.9);
  }
  size_t state_size() const override { return incremental_ ? 2 : 0; }
  void add_to_state(int id, std::span<double> state) const override {
    state[0] += work_.at(id);
    state[1] += 1;
  }
  double state_ms(std::span<const double> state) const override {
    ++calls;
    return state[1] > 0 ? 0.05 + std::pow(state[0], 0.9) : 0.0;
  }
  mutable long calls = 0;

 private:
  bool incremental_;
  std::vector<double> work_;
};

class ToyCommModel : public CommModel {
 public:
  std::string name() const override { return "toy"; }
  void comm_ms(std::span<const double> dims, std::span<const double> delays,
               std::span<double> fwd, std::span<double> bwd) const override {
    double max_delay = 0;
    for (double d : delays) max_delay = std::max(max_delay, d);
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!bwd.empty()) bwd[d] = 0.02 + 2e-4 * dims[d];
      if (!fwd.empty()) fwd[d] = 0.02 + 2e-4 * dims[d] + (max_delay - delays[d]);
    }
  }
  // Row pieces' columns cost like the all-to-all's, each way; indices 1 ms per
  // 10 MB received; an all-reduce 1 ms per 10 MB, backward.
  void collective_ms(const CollectiveLoad& load, std::span<double> fwd,
                     std::span<double> bwd) const override {
    for (size_t d = 0; d < fwd.size(); ++d) {
      fwd[d] += 2e-4 * load.rw_dim_sums[d] + 1e-7 * load.index_recv_bytes[d];
      bwd[d] += 2e-4 * load.rw_dim_sums[d] + 1e-7 * load.allreduce_bytes;
    }
  }
};

// A compute model that registers its tables with `inner` and prices them its
// own way (compute_ms): the truths and blind models tests set against one.
class WrappedCompute : public ComputeModel {
 public:
  WrappedCompute(ComputeModel& inner, std::string name) : inner_(inner), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  int64_t batch_size() const override { return inner_.batch_size(); }
  int add_table(const TableFeatures& t) override { return inner_.add_table(t); }

 protected:
  ComputeModel& inner_;

 private:
  std::string name_;
};

// The pair; `compute` stays reachable for counting calls.
struct ToyCostModel {
  explicit ToyCostModel(bool incremental = false)
      : compute(std::make_shared<ToyComputeModel>(incremental)),
        model{compute, std::make_shared<ToyCommModel>(), "toy", {}} {}
  std::shared_ptr<ToyComputeModel> compute;
  CostModel model;
  operator const CostModel&() const { return model; }
};

}  // namespace embshard::testing
