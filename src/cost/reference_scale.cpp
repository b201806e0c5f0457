// The scale of a cost model's ground truth, from its manifest's data entries.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/measure/alltoall.h"
#include "embshard/measure/shard_timer.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/machine.h"

namespace embshard {

using nlohmann::json;

namespace {

// A manifest's fields by pointer, so that one of another type is named
// (json_field.h).
struct ManifestFields {
  const json& manifest;
  const std::string& path;
  std::string cpu = cpu_model();

  const json* optional(const std::string& pointer, JsonKind kind) const {
    return json_optional(manifest, pointer, kind, path);
  }
  std::string text(const std::string& pointer) const {
    const json* v = optional(pointer, JsonKind::kString);
    return v ? v->get<std::string>() : std::string();
  }
  std::string file_of(const std::string& entry) const {
    const std::string file = text(entry + "/path");
    return file.empty() ? std::string("?") : file;
  }
  // Only data measured on a machine like this one set its scale: a
  // reference time is a time on that machine.
  bool here(const std::string& entry) const { return text(entry + "/machine/cpu") == cpu; }
};

// Compute: every training file's probe, which must be today's probe on this
// executor, normalized against (not raw medians), on one reference. A file
// whose scale anchors set (bench compute --scale anchors) was put on the
// scale of the model that priced its anchors, not on a reference of its own:
// it takes the others' (and sets none where every file is such).
void set_compute_scale(const ManifestFields& m, const std::string& compute,
                       const std::string& ground_truth, const std::string& executor,
                       ReferenceScale& scale) {
  const json probe_description = reference_probe_json();
  const json* entries = m.optional(compute, JsonKind::kArray);
  bool complete = entries != nullptr && m.text(ground_truth).starts_with("normalized");
  for (size_t i = 0; complete && i < entries->size(); ++i) {
    const std::string entry = fmt::format("{}/{}", compute, i);
    const json* probe = m.optional(entry + "/probe", JsonKind::kObject);
    const json* recorded = m.optional(entry + "/executor", JsonKind::kString);
    if (!probe || !probe->contains("reference") || !m.here(entry) || !recorded ||
        *recorded != executor) {
      complete = false;
      break;
    }
    const json& how = (*entries)[i].is_object() ? (*entries)[i].value("scale", json()) : json();
    if (how.is_object() && how.value("method", json()) == "anchors") continue;
    json description = *probe;
    description.erase("reference");
    const ProbeReference r =
        probe_reference_from_json(m.manifest, entry + "/probe/reference",
                                  fmt::format("{} (data file {})", m.path, m.file_of(entry)));
    if (description != probe_description ||
        (scale.compute && scale.compute->reference_ms != r.reference_ms)) {
      complete = false;
      break;
    }
    scale.compute = r;
  }
  if (!complete || !scale.compute) {
    scale.compute.reset();
    scale.note = fmt::format(
        "the model's compute data do not share one reference probe of normalized "
        "measurements{} on this machine's CPU ({})",
        executor.empty() ? "" : " (" + executor + ")", m.cpu);
  }
}

// Comm: the file at this rank count and batch.
void set_comm_scale(const ManifestFields& m, const std::string& comm, int devices, int64_t batch,
                    ReferenceScale& scale) {
  const json* comm_entries = m.optional(comm, JsonKind::kArray);
  for (size_t i = 0; comm_entries && i < comm_entries->size(); ++i) {
    const std::string entry = fmt::format("{}/{}", comm, i);
    const auto count = [&](const char* key, int64_t absent) {
      const json* v = m.optional(entry + key, JsonKind::kCount);
      return v ? v->get<int64_t>() : absent;
    };
    if (count("/num_devices", 0) != devices || count("/batch", 0) != batch || !m.here(entry)) {
      continue;
    }
    // `eval` interleaves the standard reference exchange; another one's times
    // are another scale (an entry that names none: the standard).
    const int64_t dim = count("/probe/exchange_dim", kReferenceExchangeDim);
    if (dim != kReferenceExchangeDim) {
      scale.note += fmt::format(
          "{}data.comm entry {} was normalized by a reference exchange of {} "
          "columns, not {}",
          scale.note.empty() ? "" : "; ", m.file_of(entry), dim, kReferenceExchangeDim);
      continue;
    }
    const json* reference = m.optional(entry + "/probe/reference_ms", JsonKind::kNumbers);
    const auto ms = reference ? reference->get<std::vector<double>>() : std::vector<double>{};
    ES_CHECK(ms.empty() || static_cast<int>(ms.size()) == devices,
             "{}: data.comm entry {} holds {} ranks' reference times for {} ranks", m.path,
             m.file_of(entry), ms.size(), devices);
    for (double t : ms) {
      ES_CHECK(std::isfinite(t) && t > 0, "{}: data.comm entry {}: reference time {}", m.path,
               m.file_of(entry), t);
    }
    scale.exchange_ms = ms;
  }
  if (scale.exchange_ms.empty()) {
    scale.note += fmt::format(
        "{}no comm data at {} ranks and batch {} on this machine's cpu record a reference "
        "exchange",
        scale.note.empty() ? "" : "; ", devices, batch);
  }
}

// The scale from a parsed manifest at `path` (model_reference_scale).
ReferenceScale scale_from_manifest(const json& manifest, const std::string& path,
                                   const std::string& executor, int devices, int64_t batch) {
  ReferenceScale scale;
  scale.source = path;
  const ManifestFields m{manifest, path};
  // A fitted model predicts on the scale of the files it was fitted to
  // (`fitted.scale`): its compute, and its exchanges where it fitted them.
  std::string compute = "/data/compute", ground_truth = "/data/ground_truth", comm = "/data/comm";
  if (m.optional("/fitted/scale", JsonKind::kObject)) {
    json_field(manifest, "/fitted/scale/compute", JsonKind::kArray, path);
    compute = "/fitted/scale/compute";
    ground_truth = "/fitted/scale/ground_truth";
    if (m.optional("/fitted/scale/comm", JsonKind::kArray)) comm = "/fitted/scale/comm";
    scale.source = path + " (the data it was fitted to)";
  }
  set_compute_scale(m, compute, ground_truth, executor, scale);
  set_comm_scale(m, comm, devices, batch, scale);
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
    return scale_from_manifest(parse_json_document(read_file(path), path), path, executor, devices,
                               batch);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not JSON, or a field of the wrong type: {}", path, e.what()));
  }
}

}  // namespace embshard
