// Cost models: what the planner searches against.
//
// cost(plan) = max over devices d of (compute_d + fwd_comm_d + bwd_comm_d).
// A cost model is a pair: a ComputeModel for compute_d and a CommModel for the
// all-to-alls. Both are created by name from one registry (below), never by
// static initialisation, so that the lists of names are the whole truth.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embshard/cost/comm_model.h"
#include "embshard/cost/compute_model.h"
#include "embshard/cost/floor.h"

namespace embshard {

class Reporter;

// What a cost model's figures were measured on, so that a plan can say so and
// say when it is extrapolated (another batch, device count or machine).
struct ModelSource {
  std::string hardware;   // "cpu (1 thread) on AMD EPYC", "cuda (NVIDIA H100 80GB HBM3)"
  std::string host_cpu;   // the CPU a cpu executor ran on; "" for other executors
  int64_t min_batch = 0, max_batch = 0;  // the batches measured (0: unknown)
  std::string comm;       // where the communication figures come from
  int min_devices = 0, max_devices = 0;  // device counts the all-to-alls ran on (0: none)
  int64_t comm_min_batch = 0, comm_max_batch = 0;  // the batches they ran at (0: unknown)
  Bandwidths bandwidths;                           // for physical floors (cost/floor.h); 0: unknown
};

struct CostModel {
  std::shared_ptr<ComputeModel> compute;
  std::shared_ptr<const CommModel> comm;
  std::string name;  // for reports: which models, and any caveat (scaled batch, ...)
  ModelSource source;
};

// One line per way a task at `batch_size` on `num_devices` leaves what
// `source` measured: another batch, another device count, another CPU than
// this machine's. Empty: the figures are interpolated.
std::vector<std::string> extrapolations(const ModelSource& source, int64_t batch_size,
                                        int num_devices);
// "cpu (1 thread) on AMD EPYC at batches 1024-8192; comm: ...".
std::string describe(const ModelSource& source);

// Where the pre-trained models shipped with the repository live:
// <dir>/neural (the neural model set) and <dir>/analytic.json (a calibration).
// It is data_root()/models (util/data_dir.h), found at run time.
std::string shipped_models_dir();
// The neural model directory `model_dir` names: itself, or the neural/ of a
// model set directory ("": the shipped one).
std::string neural_model_dir(const std::string& model_dir);

struct CostModelOptions {
  std::string model_dir;     // neural: the trained model directory ("": the shipped one)
  std::string calibration;   // analytic: `embshard calibrate`'s file ("": the shipped one)
  std::string workload_dir;  // measured: the workload whose traces are executed
  std::string executor = "cpu";  // measured: where (create_executor's names)
  int64_t batch_size = 0;    // 0: the model's own
  int threads = 1;           // measured: the executor's threads
  bool thread_cpu_time = false;  // measured: ExecutorOptions::thread_cpu_time
  // measured: seconds of reference-probe runs its quiet time is taken from
  // (the shard timer normalizes every shard against it).
  double reference_window_s = 20;
  // Inference: the costs of a step's forward alone (create_cost_model).
  bool forward_only = false;
};

// Valid names: compute "analytic", "neural", "measured"; comm "analytic",
// "neural". Error lists them when a name is unknown.
std::shared_ptr<ComputeModel> create_compute_model(const std::string& name,
                                                   const CostModelOptions& options);
std::shared_ptr<const CommModel> create_comm_model(const std::string& name,
                                                   const CostModelOptions& options);

// The cost models by name: "analytic", "neural" (its compute and comm
// networks), "measured" (compute on the executor, the analytic all-to-all).
// With options.forward_only, of inference steps: the all-to-alls' and
// collectives' forward, and the forward's compute, timed on the executor
// ("measured") or from the analytic terms ("analytic", and "neural" too: the
// networks learned training steps; from the set's analytic.json, else the
// shipped one).
const std::vector<std::string>& cost_model_names();
CostModel create_cost_model(const std::string& name, const CostModelOptions& options);
// create_cost_model, except that "neural" without a model directory on disk
// falls back to "analytic" with a note to `reporter`: the planner works out
// of the box even where the shipped networks are absent.
CostModel open_cost_model(const std::string& name, const CostModelOptions& options,
                          Reporter& reporter);

}  // namespace embshard
