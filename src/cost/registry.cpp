// The one registry of cost models: created by name, never by static
// initialisation, so that the lists below are the whole truth.
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "embshard/cost/analytic/model.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/data_dir.h"
#include "embshard/util/error.h"
#include "embshard/util/machine.h"
#include "embshard/util/reporter.h"

namespace embshard {
namespace {

// Empty paths mean the shipped models. A model set directory (neural/ and,
// where one device cannot measure an all-to-all, comm.json, or a calibration
// of its own machine, analytic.json, as the shipped models/ has) stands for
// its networks and its comm constants or calibration (the collectives, and
// the all-to-all outside the networks' device counts). The shipped models are
// looked up only where model `name` needs them, so that a model set of one's
// own plans where no data root is found (util/data_dir.h).
CostModelOptions with_defaults(const std::string& name, const CostModelOptions& options) {
  CostModelOptions o = options;
  ES_CHECK(o.batch_size >= 0, "cost model: batch size {} is negative", o.batch_size);
  if (name != "analytic" || !options.model_dir.empty()) {
    o.model_dir = neural_model_dir(options.model_dir);
  }
  if (!options.model_dir.empty() && o.calibration.empty()) {
    // The set: the directory given, or the one holding it when the given one
    // is a set's neural/ (its comm.json belongs to it just the same).
    std::filesystem::path given = std::filesystem::path(options.model_dir).lexically_normal();
    if (given.filename().empty()) given = given.parent_path();
    const std::filesystem::path set =
        o.model_dir != options.model_dir ? given : given.parent_path();
    for (const char* file : {"comm.json", "analytic.json"}) {
      if (o.calibration.empty() && std::filesystem::exists(set / file)) {
        o.calibration = (set / file).string();
      }
    }
  }
  if (o.calibration.empty()) {
    if (name == "neural" && !options.model_dir.empty()) {
      // Optional for networks of one's own (optional_calibration): the shipped
      // one where there is a data root, none where there is not.
      try {
        o.calibration = shipped_models_dir() + "/analytic.json";
      } catch (const Error&) {
      }
    } else {
      o.calibration = shipped_models_dir() + "/analytic.json";
    }
  }
  return o;
}

// The analytic all-to-all stands in outside the device counts the neural
// communication networks were trained on, when a calibration is at hand.
std::optional<Calibration> optional_calibration(const std::string& path) {
  if (path.empty() || !std::filesystem::exists(path)) return std::nullopt;
  if (std::filesystem::path(path).filename() == "comm.json") return load_comm_constants(path);
  return load_calibration(path);
}

// A calibration whose compute terms were fitted (an analytic.json; a GPU
// set's comm.json holds all-to-all constants only).
Calibration load_forward_calibration(const std::string& path) {
  ES_CHECK(!path.empty() && std::filesystem::path(path).filename() != "comm.json",
           "inference: the forward's compute comes from an analytic calibration, and this model "
           "set has none ({}): give one with --calibration",
           path.empty() ? std::string("no analytic.json") : path);
  return load_calibration(path);
}

}  // namespace

bool CollectiveLoad::empty() const {
  if (allreduce_bytes > 0) return false;
  for (size_t d = 0; d < rw_dim_sums.size(); ++d) {
    if (rw_dim_sums[d] > 0 || index_recv_bytes[d] > 0 || index_send_bytes[d] > 0) return false;
  }
  return true;
}

void CollectiveLoad::add_row_shard(int device, double cols, double index_bytes) {
  const size_t n = rw_dim_sums.size();
  rw_dim_sums[device] += cols;
  index_recv_bytes[device] += index_bytes * (n - 1) / n;
  for (size_t e = 0; e < n; ++e) {
    if (e != static_cast<size_t>(device)) index_send_bytes[e] += index_bytes / n;
  }
}

void CollectiveLoad::reset(size_t devices) {
  rw_dim_sums.assign(devices, 0.0);
  index_recv_bytes.assign(devices, 0.0);
  index_send_bytes.assign(devices, 0.0);
  allreduce_bytes = 0;
}

void ComputeModel::add_to_state(int, std::span<double>) const {
  ES_THROW("compute model '{}' has no incremental state (state_size() is 0)", name());
}

double ComputeModel::state_ms(std::span<const double>) const {
  ES_THROW("compute model '{}' has no incremental state (state_size() is 0)", name());
}

std::string shipped_models_dir() { return data_root() + "/models"; }

std::string neural_model_dir(const std::string& model_dir) {
  if (model_dir.empty()) return shipped_models_dir() + "/neural";
  const std::filesystem::path set(model_dir);
  if (!std::filesystem::exists(set / kManifestFile) &&
      std::filesystem::exists(set / "neural" / kManifestFile)) {
    return (set / "neural").string();
  }
  return model_dir;
}

namespace {

const std::vector<std::string>& compute_model_names() {
  static const std::vector<std::string> names = {"analytic", "neural", "measured"};
  return names;
}

const std::vector<std::string>& comm_model_names() {
  static const std::vector<std::string> names = {"analytic", "neural"};
  return names;
}

}  // namespace

const std::vector<std::string>& cost_model_names() {
  static const std::vector<std::string> names = {"analytic", "neural", "measured"};
  return names;
}

std::shared_ptr<ComputeModel> create_compute_model(const std::string& name,
                                                   const CostModelOptions& options) {
  const CostModelOptions o = with_defaults(name, options);
  if (name == "analytic") {
    return make_analytic_compute_model(load_calibration(o.calibration), o.batch_size,
                                       o.forward_only);
  }
  if (name == "neural" && o.forward_only) return create_cost_model(name, o).compute;
  if (name == "neural") {
    return std::make_shared<NeuralComputeModel>(load_prepared_neural_model(o.model_dir),
                                                o.batch_size);
  }
  if (name == "measured") return make_measured_compute_model(o);  // a MeasuredComputeModel
  ES_THROW("unknown compute model '{}': valid names are {}", name,
           fmt::join(compute_model_names(), ", "));
}

std::shared_ptr<const CommModel> create_comm_model(const std::string& name,
                                                   const CostModelOptions& options) {
  const CostModelOptions o = with_defaults(name, options);
  if (name == "analytic" || name == "neural") return create_cost_model(name, o).comm;
  ES_THROW("unknown communication model '{}': valid names are {}", name,
           fmt::join(comm_model_names(), ", "));
}

CostModel create_cost_model(const std::string& name, const CostModelOptions& options) {
  const CostModelOptions o = with_defaults(name, options);
  if (name == "analytic") {
    return make_analytic_cost_model(load_calibration(o.calibration), o.batch_size, o.forward_only);
  }
  if (name == "neural" && o.forward_only) {
    // The networks learned training steps: the forward's compute is the
    // analytic terms', the exchanges' forward the networks'.
    CostModelOptions training = o;
    training.forward_only = false;
    CostModel m = create_cost_model("neural", training);
    const Calibration calibration = load_forward_calibration(o.calibration);
    m.compute = make_analytic_compute_model(calibration, m.compute->batch_size(), true);
    m.comm = forward_comm_model(std::move(m.comm));
    m.name = fmt::format("analytic forward (compute, {}); {} (comm, forward)",
                         std::filesystem::path(o.calibration).filename().string(), m.name);
    return m;
  }
  if (name == "neural") {
    return make_neural_cost_model(load_prepared_neural_model(o.model_dir), o.batch_size,
                                  optional_calibration(o.calibration));
  }
  if (name == "measured") {
    // One process cannot run an all-to-all: the analytic formula stands in.
    const Calibration calibration = load_calibration(o.calibration);
    auto compute = make_measured_compute_model(o);
    ModelSource source;
    source.hardware = fmt::format("{} on {}, measured now", o.executor, cpu_model());
    if (o.executor == "cpu") source.host_cpu = cpu_model();
    source.min_batch = source.max_batch = compute->batch_size();
    source.comm = analytic_comm_source(calibration);
    auto comm = make_analytic_comm_model(calibration, compute->batch_size());
    if (o.forward_only) {
      return {compute, forward_comm_model(std::move(comm)),
              "measured forward (compute: executor; comm: analytic, forward)", source};
    }
    return {compute, comm, "measured (compute: executor; comm: analytic)", source};
  }
  ES_THROW("unknown cost model '{}': valid names are {}", name,
           fmt::join(cost_model_names(), ", "));
}

std::vector<std::string> extrapolations(const ModelSource& s, int64_t batch_size,
                                        int num_devices) {
  std::vector<std::string> out;
  if (s.min_batch > 0 && (batch_size < s.min_batch || batch_size > s.max_batch)) {
    out.push_back(s.min_batch == s.max_batch
                      ? fmt::format("batch {} is not the measured {}", batch_size, s.min_batch)
                      : fmt::format("batch {} is outside the measured {}-{}", batch_size,
                                    s.min_batch, s.max_batch));
  }
  if (s.comm_min_batch > 0 && (batch_size < s.comm_min_batch || batch_size > s.comm_max_batch)) {
    out.push_back(fmt::format("batch {}: the all-to-alls were measured at {}", batch_size,
                              s.comm_min_batch == s.comm_max_batch
                                  ? fmt::format("{}", s.comm_min_batch)
                                  : fmt::format("{}-{}", s.comm_min_batch, s.comm_max_batch)));
  }
  if (s.min_devices > 0 && num_devices > 1 &&  // one device exchanges nothing
      (num_devices < s.min_devices || num_devices > s.max_devices)) {
    out.push_back(fmt::format("{} devices: the all-to-alls were measured on {}-{}", num_devices,
                              s.min_devices, s.max_devices));
  }
  if (!s.host_cpu.empty() && s.host_cpu != cpu_model()) {
    out.push_back(fmt::format("measured on {}, not this machine ({})", s.host_cpu, cpu_model()));
  }
  return out;
}

std::string describe(const ModelSource& s) {
  std::string batches = "at an unknown batch";
  if (s.min_batch > 0) {
    batches = s.min_batch == s.max_batch ? fmt::format("at batch {}", s.min_batch)
                                         : fmt::format("at batches {}-{}", s.min_batch, s.max_batch);
  }
  return fmt::format("compute: {} {}; comm: {}", s.hardware.empty() ? "unknown" : s.hardware,
                     batches, s.comm.empty() ? "unknown" : s.comm);
}

CostModel open_cost_model(const std::string& name, const CostModelOptions& options,
                          Reporter& reporter) {
  const CostModelOptions o = with_defaults(name, options);
  ES_CHECK(name != "neural" || options.model_dir.empty() || std::filesystem::exists(o.model_dir),
           "--model {}: no such directory (give a directory of `embshard train` or `embshard "
           "fit`, or leave --model out for the shipped models)",
           o.model_dir);
  if (name == "neural" && !std::filesystem::exists(o.model_dir)) {
    reporter.note(fmt::format("note: no trained model directory {}; using the analytic cost "
                              "model instead",
                              o.model_dir));
    return create_cost_model("analytic", o);
  }
  return create_cost_model(name, o);
}

}  // namespace embshard
