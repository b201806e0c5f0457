// The measured compute model: every shard's fused forward + backward +
// update measured on an executor with a workload's real traces, against the
// reference probe (the shard timer's measure(): drift cancelled). Ground
// truth for evaluation, and the slowest "model" by far.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "embshard/measure/shard_timer.h"
#include "embshard/cost/cost_model.h"

namespace embshard {

class MeasuredComputeModel : public ComputeModel {
 public:
  // options.workload_dir: the workload whose traces are executed (its batch;
  // options.batch_size must be 0 or equal to it); options.executor and
  // threads: where; options.reference_window_s: the probe's reference.
  explicit MeasuredComputeModel(const CostModelOptions& options);
  std::string name() const override;
  std::string executor_name() const;
  int64_t batch_size() const override { return workload_.batch_size; }
  // Tables are matched to the workload by source_table, else by rows,
  // pooling factor and reuse; the same table at the same dim gets one id.
  int add_table(const TableFeatures& table) override;
  // Measured once per set of ids and pass (cached; a shard is a set).
  double compute_ms(std::span<const int> table_ids) const override;
  // The same measurement on the raw clock: its raw median, not normalized.
  double raw_ms(std::span<const int> table_ids) const;
  void set_fresh_pass(bool fresh) override;
  // How many times the set was measured (the passes that asked for it).
  int times_measured(std::span<const int> table_ids) const;

  // The probe reference every measurement is normalized against: estimated
  // on first use, or set (a resumed evaluation keeps its file's scale).
  ProbeReference probe_reference() const;
  void set_probe_reference(const ProbeReference& reference);
  // The timer every measurement goes through (anchors share its probe).
  ShardTimer& timer() const { return timer_; }

 private:
  Workload workload_;
  std::unique_ptr<Executor> executor_;
  mutable ShardTimer timer_;
  std::vector<ShardTable> tables_;
  mutable std::mutex mutex_;
  struct Figures {
    double normalized_ms, raw_ms;
  };
  const Figures& measured(std::span<const int> table_ids) const;  // mutex_ held
  mutable std::map<std::pair<int, std::vector<int>>, Figures> cache_;  // by pass and set
  int pass_ = 0, passes_ = 0;  // the current pass (0: the first), the last fresh one
};

std::shared_ptr<MeasuredComputeModel> make_measured_compute_model(
    const CostModelOptions& options);

// `measured` on the raw clock: the raw medians of its measurements (a shard
// measured through either is measured once), its tables and batch.
std::shared_ptr<ComputeModel> raw_clock_view(std::shared_ptr<MeasuredComputeModel> measured);

// The scale of a cost model's ground truth: the reference probe time its
// compute data were normalized to, and every rank's reference exchange time
// of its comm data at `devices` ranks and `batch` (empty where the model
// recorded none: an analytic model, a model trained on data without a
// reference probe, no comm data at that rank count and batch; `note` says why).
struct ReferenceScale {
  std::optional<ProbeReference> compute;
  std::vector<double> exchange_ms;
  std::string source;  // the manifest
  std::string note;    // what is missing, for the report ("" when complete)
};
// From the manifest of `model_dir` ("" : the shipped neural model) when
// `cost_model` is a neural one; the compute scale only where every compute
// file was normalized on `executor` (as MeasuredComputeModel::executor_name
// says it). Error naming the manifest and the field on a malformed entry.
ReferenceScale model_reference_scale(const std::string& cost_model, const std::string& model_dir,
                                     const std::string& executor, int devices, int64_t batch);

}  // namespace embshard
