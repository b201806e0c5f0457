// The measured compute model: every shard's fused forward + backward +
// update timed on the executor with a workload's real traces. Ground truth
// for evaluation, and the slowest "model" by far.
#pragma once

#include <memory>

#include "embshard/cost/cost_model.h"

namespace embshard {

// options.workload_dir: the workload whose traces are executed (its batch;
// options.batch_size must be 0 or equal to it); options.threads: executor
// threads.
std::shared_ptr<ComputeModel> make_measured_compute_model(const CostModelOptions& options);

}  // namespace embshard
