// The scale of a cost model's ground truth, from its manifest's data entries.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/alltoall.h"
#include "embshard/bench/shard_timer.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/machine.h"

namespace embshard {

using nlohmann::json;

namespace {

// The scale from a parsed manifest at `path` (model_reference_scale).
ReferenceScale scale_from_manifest(const json& manifest, const std::string& path,
                                   const std::string& executor, int devices, int64_t batch) {
  ReferenceScale scale;
  scale.source = path;
  json data = manifest.value("data", json::object());
  ES_CHECK(data.is_object(), "{}: field 'data' is not an object", path);
  // A fitted model predicts on the scale of the files it was fitted to
  // (`fitted.scale`): its compute, and its exchanges where it fitted them.
  const json fitted = manifest.value("fitted", json::object()).value("scale", json());
  if (fitted.is_object()) {
    ES_CHECK(fitted.contains("compute") && fitted["compute"].is_array(),
             "{}: field 'fitted.scale' has no 'compute' list", path);
    data["compute"] = fitted["compute"];
    data["ground_truth"] = fitted.value("ground_truth", json());
    if (fitted.contains("comm")) data["comm"] = fitted["comm"];
    scale.source = path + " (the data it was fitted to)";
  }

  // Only data measured on a machine like this one set its scale: a reference
  // time is a time on that machine.
  const std::string cpu = cpu_model();
  auto here = [&](const json& entry) {
    return entry.value("machine", json::object()).value("cpu", std::string()) == cpu;
  };
  // Compute: every training file's probe, which must be today's probe on
  // this executor, normalized against (not raw medians), on one reference.
  const json probe_description = reference_probe_json();
  bool complete = data.contains("compute") && data["compute"].is_array() &&
                  data.value("ground_truth", std::string()).starts_with("normalized");
  for (const json& entry : complete ? data["compute"] : json::array()) {
    const json probe = entry.value("probe", json());
    if (!probe.is_object() || !probe.contains("reference") || !here(entry) ||
        entry.value("executor", json()) != json(executor)) {
      complete = false;
      break;
    }
    json description = probe;
    description.erase("reference");
    const ProbeReference r = probe_reference_from_json(
        probe["reference"], fmt::format("{}: data.compute[{}].probe.reference", path,
                                        entry.value("path", std::string("?"))));
    if (description != probe_description ||
        (scale.compute && scale.compute->reference_ms != r.reference_ms)) {
      complete = false;
      break;
    }
    scale.compute = r;
  }
  if (!complete) {
    scale.compute.reset();
    scale.note = fmt::format(
        "the model's compute data do not share one reference probe of normalized "
        "measurements{} on this machine's CPU ({})",
        executor.empty() ? "" : " (" + executor + ")", cpu);
  }

  // Comm: the file at this rank count and batch.
  for (const json& entry : data.value("comm", json::array())) {
    if (entry.value("num_devices", 0) != devices || entry.value("batch", int64_t{0}) != batch ||
        !here(entry)) {
      continue;
    }
    const json probe = entry.value("probe", json::object());
    // `eval` interleaves the standard reference exchange; another one's times
    // are another scale (an entry that names none: the standard).
    if (probe.value("exchange_dim", kReferenceExchangeDim) != kReferenceExchangeDim) {
      scale.note += fmt::format("{}data.comm entry {} was normalized by a reference exchange of {} "
                                "columns, not {}",
                                scale.note.empty() ? "" : "; ",
                                entry.value("path", std::string("?")),
                                probe.value("exchange_dim", 0), kReferenceExchangeDim);
      continue;
    }
    const auto ms = probe.value("reference_ms", std::vector<double>{});
    ES_CHECK(ms.empty() || static_cast<int>(ms.size()) == devices,
             "{}: data.comm entry {} holds {} ranks' reference times for {} ranks", path,
             entry.value("path", std::string("?")), ms.size(), devices);
    for (double m : ms) {
      ES_CHECK(std::isfinite(m) && m > 0, "{}: data.comm entry {}: reference time {}", path,
               entry.value("path", std::string("?")), m);
    }
    scale.exchange_ms = ms;
  }
  if (scale.exchange_ms.empty()) {
    scale.note += fmt::format(
        "{}no comm data at {} ranks and batch {} on this machine's cpu record a reference "
        "exchange",
        scale.note.empty() ? "" : "; ", devices, batch);
  }
  return scale;
}

}  // namespace

ReferenceScale model_reference_scale(const std::string& cost_model, const std::string& model_dir,
                                     const std::string& executor, int devices, int64_t batch) {
  ReferenceScale scale;
  if (cost_model != "neural") {
    scale.note = fmt::format("the {} cost model has no measured scale", cost_model);
    return scale;
  }
  const std::string path = (std::filesystem::path(neural_model_dir(model_dir)) / "manifest.json").string();
  scale.source = path;
  if (!file_exists(path)) {
    scale.note = fmt::format("{}: no such file", path);
    return scale;
  }
  try {
    return scale_from_manifest(json::parse(read_file(path)), path, executor, devices, batch);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not JSON, or a field of the wrong type: {}", path, e.what()));
  }
}

}  // namespace embshard
