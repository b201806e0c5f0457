// After training: held-out accuracy through the production (torch-free)
// inference path, and the manifest's record of what the model was made from.
#include <fmt/format.h>

#include <filesystem>

#include "embshard/cost/neural_train.h"
#include "embshard/util/machine.h"

namespace embshard {
namespace {

using nlohmann::json;

Comparison compute_comparison(const NeuralModel& model, const ComputeData& data,
                              const std::vector<int>& records, std::string name,
                              std::string title) {
  Comparison c{std::move(name), std::move(title), {}, {}};
  for (int i : records) {
    c.predicted.push_back(predict_compute_ms(model, data.records[i].tables));
    c.measured.push_back(data.records[i].ms);
  }
  return c;
}

json data_file_entry(const std::string& path, const json& header, size_t records, size_t bad) {
  return {{"path", std::filesystem::absolute(path).lexically_normal().string()},
          {"crc32", fmt::format("{:08x}", file_crc32(path))},
          {"format", header.value("format", "")},
          {"records", records},
          {"skipped_bad_records", bad},
          {"machine", header.value("machine", json())},
          {"batch",
           header.contains("batch_size") ? header["batch_size"] : header.value("batch", json())},
          {"threads", header.value("threads", json())},
          {"num_devices", header.value("num_devices", json())}};
}

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
          {"hidden", o.hidden},
          {"embed", o.embed},
          {"threads", o.threads}};
}

}  // namespace

// Comm predictions of every device of the given records, one comparison per direction.
void comm_comparisons(const NeuralModel& model, const std::vector<CommData>& files,
                      const std::vector<std::pair<int, int>>& items, const std::string& suffix,
                      const std::string& title_suffix, std::vector<Comparison>& out) {
  Comparison fwd{"comm_fwd" + suffix, "comm forward" + title_suffix, {}, {}};
  Comparison bwd{"comm_bwd" + suffix, "comm backward" + title_suffix, {}, {}};
  for (const auto& [f, r] : items) {
    const CommRecord& rec = files[f].records[r];
    std::vector<double> pf(rec.dim_sums.size()), pb(rec.dim_sums.size());
    predict_comm_ms(model, rec.dim_sums, rec.delays_ms, pf, pb);
    fwd.predicted.insert(fwd.predicted.end(), pf.begin(), pf.end());
    fwd.measured.insert(fwd.measured.end(), rec.fwd_ms.begin(), rec.fwd_ms.end());
    bwd.predicted.insert(bwd.predicted.end(), pb.begin(), pb.end());
    bwd.measured.insert(bwd.measured.end(), rec.bwd_ms.begin(), rec.bwd_ms.end());
  }
  out.push_back(std::move(fwd));
  out.push_back(std::move(bwd));
}

void evaluate_trained_model(const TrainOptions& o, const ComputeData& compute,
                            const ComputeSplit& split, const std::vector<CommData>& comm,
                            const CommSplit& comm_split, TrainResult& result) {
  NeuralModel& model = result.model;
  auto& cmp = result.comparisons;
  cmp.push_back(compute_comparison(model, compute, split.test, "compute_test",
                                   "compute, test split (seen tables)"));
  cmp.push_back(compute_comparison(model, compute, split.unseen, "compute_unseen",
                                   "compute, held-out tables only"));
  json data = {{"compute", data_file_entry(o.compute_path, compute.header, compute.records.size(),
                                           compute.problems.size())}};
  if (!o.unseen_compute_path.empty()) {
    const ComputeData unseen = load_compute_data(o.unseen_compute_path);
    report_problems(o.unseen_compute_path, unseen.problems);
    std::vector<int> all(unseen.records.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    cmp.push_back(compute_comparison(model, unseen, all, "compute_unseen_file",
                                     "compute, tables of another pool (never seen)"));
    data["unseen_compute"] = data_file_entry(o.unseen_compute_path, unseen.header,
                                             unseen.records.size(), unseen.problems.size());
  }
  if (!comm.empty()) {
    comm_comparisons(model, comm, comm_split.test, "_test", ", test split, all device counts", cmp);
    for (size_t f = 0; f < comm.size(); ++f) {  // per device count: does one model serve all?
      std::vector<std::pair<int, int>> items;
      for (const auto& item : comm_split.test) {
        if (item.first == static_cast<int>(f)) items.push_back(item);
      }
      const int n = comm[f].num_devices;
      comm_comparisons(model, comm, items, fmt::format("_test_n{}", n),
                       fmt::format(", test split, {} devices", n), cmp);
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
  model.info["machine"] = machine_info();
  model.info["batch"] = model.batch_size;
  model.info["threads"] = compute.header.value("threads", 1);
  model.info["training"] = options_json(o);
  model.info["holdout_pool_tables"] = split.holdout_pool_ids;
  model.info["accuracy"] = accuracy;
  model.info["notes"] = result.notes;
}

}  // namespace embshard
