// The measured compute model: every shard's fused forward + backward +
// update measured on an executor with a workload's real traces, against the
// reference probe (the shard timer's measure(): drift cancelled). Ground
// truth for evaluation, and the slowest "model" by far.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "embshard/bench/shard_timer.h"
#include "embshard/cost/cost_model.h"

namespace embshard {

class MeasuredComputeModel : public ComputeModel {
 public:
  // options.workload_dir: the workload whose traces are executed (its batch;
  // options.batch_size must be 0 or equal to it); options.executor and
  // threads: where; options.reference_window_s: the probe's reference.
  explicit MeasuredComputeModel(const CostModelOptions& options);
  std::string name() const override;
  int64_t batch_size() const override { return workload_.batch_size; }
  // Tables are matched to the workload by source_table, else by rows,
  // pooling factor and reuse; the same table at the same dim gets one id.
  int add_table(const TableFeatures& table) override;
  // Measured once per set of ids (cached; a shard is a set).
  double compute_ms(std::span<const int> table_ids) const override;

  // The probe reference every measurement is normalized against: estimated
  // on first use, or set (a resumed evaluation keeps its file's scale).
  ProbeReference probe_reference() const;
  void set_probe_reference(const ProbeReference& reference);

 private:
  Workload workload_;
  std::unique_ptr<Executor> executor_;
  mutable ShardTimer timer_;
  std::vector<ShardTable> tables_;
  mutable std::mutex mutex_;
  mutable std::map<std::vector<int>, double> cache_;
};

std::shared_ptr<MeasuredComputeModel> make_measured_compute_model(
    const CostModelOptions& options);

}  // namespace embshard
