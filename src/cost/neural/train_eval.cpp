// After training: held-out accuracy through the production (torch-free)
// inference path, and the manifest's record of what the model was made from.
#include <fmt/format.h>

#include <filesystem>

#include "embshard/cost/neural/train.h"
#include "embshard/cost/neural/validate.h"
#include "embshard/util/reporter.h"
#include "embshard/util/error.h"
#include "embshard/util/machine.h"
#include "embshard/util/statistics.h"

namespace embshard {

using nlohmann::json;

namespace {

json scale_entry(const json& header) {
  const auto it = header.find("scale");
  if (it == header.end() || !it->is_object()) return json();
  json scale = *it;
  scale.erase("anchors");
  return scale;
}

}  // namespace

json data_file_entry(const std::string& path, const json& header, size_t records, size_t bad) {
  return {{"path", std::filesystem::absolute(path).lexically_normal().string()},
          {"crc32", fmt::format("{:08x}", file_crc32(path))},
          {"format", header.value("format", "")},
          {"records", records},
          {"skipped_bad_records", bad},
          {"machine", header.value("machine", json())},
          {"executor", header.value("executor", json())},
          {"batch",
           header.contains("batch_size") ? header["batch_size"] : header.value("batch", json())},
          {"threads", header.value("threads", json())},
          {"num_devices", header.value("num_devices", json())},
          // The reference its ground truth was normalized to: the model's
          // scale (model_reference_scale, docs/eval.md).
          {"probe", header.value("probe", json())},
          // How the file's scale was set (bench compute's "scale", without
          // the anchors one by one).
          {"scale", scale_entry(header)},
          // The copy bandwidth measured beside it, for physical floors.
          {"copy_gbps", header.value("copy_gbps", json())}};
}

void set_memory_bandwidth(NeuralModel& model, const json& entries) {
  std::vector<double> gbps;
  for (const json& e : entries) {
    const auto it = e.find("copy_gbps");
    if (it != e.end() && it->is_number() && it->get<double>() > 0)
      gbps.push_back(it->get<double>());
  }
  model.info.erase("memory");
  model.copy_gbps = 0;
  model.copy_source.clear();
  if (gbps.empty()) return;
  model.copy_gbps = median(gbps);
  model.copy_source = fmt::format(
      "the median copy bench compute measured with {} of its {} "
      "data files",
      gbps.size(), entries.size());
  model.info["memory"] = {{"copy_gbps", model.copy_gbps}, {"source", model.copy_source}};
}

namespace {

json options_json(const TrainOptions& o) {
  return {{"seed", o.seed},
          {"holdout_tables", o.holdout_tables},
          {"val_share", o.val_share},
          {"test_share", o.test_share},
          {"max_epochs", o.max_epochs},
          {"patience", o.patience},
          {"batch", o.batch},
          {"lr", o.lr},
          {"weight_decay", o.weight_decay},
          {"weight_average", o.weight_average},
          {"hidden", o.hidden},
          {"embed", o.embed},
          {"reuse_tail_bin", o.reuse_tail_bin},
          {"threads", o.threads}};
}

}  // namespace

void evaluate_trained_model(const TrainOptions& o, const ComputeData& compute,
                            const ComputeSplit& split, const std::vector<CommData>& comm,
                            const CommSplit& comm_split, TrainResult& result) {
  NeuralModel& model = result.model;
  auto& cmp = result.comparisons;
  cmp.push_back(compute_comparison(model, compute, split.test, "compute_test",
                                   "compute, test split (seen tables)"));
  cmp.push_back(compute_comparison(model, compute, split.unseen, "compute_unseen",
                                   "compute, held-out tables only"));
  json data = {{"ground_truth", ground_truth_label(compute.normalized)},
               {"compute", json::array()},
               {"unseen_compute", json::array()}};
  for (size_t f = 0; f < o.compute_paths.size(); ++f) {
    size_t records = 0;
    for (const ComputeRecord& r : compute.records) records += r.file == static_cast<int>(f);
    LoadOptions lo;
    lo.raw = o.raw_ground_truth;
    const ComputeData head = load_compute_data(o.compute_paths[f], lo);  // its header
    data["compute"].push_back(data_file_entry(o.compute_paths[f], head.header, records,
                                              head.problems.size()));
  }
  for (size_t f = 0; f < o.unseen_compute_paths.size(); ++f) {
    const std::string& path = o.unseen_compute_paths[f];
    LoadOptions lo;
    lo.raw = o.raw_ground_truth;
    const ComputeData unseen = load_compute_data(path, lo);
    report_problems(path, unseen.problems,
                    o.reporter != nullptr ? *o.reporter : silent_reporter());
    ES_CHECK(unseen.normalized == compute.normalized,
             "{} holds {} ground truth but the training data {}: a test must not mix them", path,
             ground_truth_label(unseen.normalized), ground_truth_label(compute.normalized));
    std::vector<int> all(unseen.records.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    const std::string suffix = f == 0 ? "" : fmt::format("_{}", f + 1);
    cmp.push_back(compute_comparison(
        model, unseen, all, "compute_unseen_file" + suffix,
        fmt::format("compute, tables of another pool (never seen), batch {}: {}",
                    unseen.batch_size, std::filesystem::path(path).filename().string())));
    for (Comparison& c : breakdown_comparisons(unseen, all, cmp.back())) {
      cmp.push_back(std::move(c));
    }
    data["unseen_compute"].push_back(data_file_entry(path, unseen.header, unseen.records.size(),
                                                     unseen.problems.size()));
  }
  if (!comm.empty()) {
    comm_comparisons(model, comm, comm_split.test, "_test", ", test split, all device counts", cmp);
    for (size_t f = 0; f < comm.size(); ++f) {  // per device count: does one model serve all?
      std::vector<std::pair<int, int>> items;
      for (const auto& item : comm_split.test) {
        if (item.first == static_cast<int>(f)) items.push_back(item);
      }
      const int n = comm[f].num_devices;
      const int64_t b = comm[f].batch_size;
      comm_comparisons(model, comm, items, fmt::format("_test_n{}_b{}", n, b),
                       fmt::format(", test split, {} devices, batch {}", n, b), cmp);
    }
    json files = json::array();
    for (size_t f = 0; f < comm.size(); ++f) {
      files.push_back(data_file_entry(o.comm_paths[f], comm[f].header, comm[f].records.size(),
                                      comm[f].problems.size()));
    }
    data["comm"] = files;
  }
  json accuracy = json::object();
  for (const Comparison& c : cmp) accuracy[c.name] = to_json(embshard::accuracy(c.predicted, c.measured));
  model.info["data"] = data;
  set_memory_bandwidth(model, data["compute"]);
  model.info["machine"] = machine_info();
  model.info["batches"] = {model.batch_size, model.max_batch_size};
  model.info["threads"] = compute.header.value("threads", 1);
  model.info["training"] = options_json(o);
  model.info["holdout_pool_tables"] = split.holdout_pool_ids;
  model.info["accuracy"] = accuracy;
  model.info["notes"] = result.notes;
}

}  // namespace embshard
