// `torchrec_planner`: TorchRec's own EmbeddingShardingPlanner, run through the
// Python that imports TorchRec (python/embshard/torchrec_peer.py says how the
// task is put to it), its plan read back as embshard shards so that it is
// validated, predicted and measured like every other planner's. The cost
// model is not consulted: TorchRec plans on its own estimates.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "embshard/search/planner.h"
#include "embshard/util/error.h"
#include "embshard/util/python_peer.h"
#include "search/planners.h"

namespace embshard {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kTaskFormat = "embshard-torchrec-task";
constexpr const char* kPlanFormat = "embshard-torchrec-peer-plan";
constexpr int kVersion = 2;

json task_json(const PlanTask& task) {
  for (int t = 0; t < task.num_tables(); ++t) {
    ES_CHECK(task.pinned_device[t] < 0,
             "torchrec_planner: table '{}' is pinned to device {}; TorchRec's planner takes "
             "no pins", task.tables[t].name, task.pinned_device[t]);
  }
  json tables = json::array(), no_split = json::array();
  for (int t = 0; t < task.num_tables(); ++t) {
    const TableSpec& s = task.tables[t];
    tables.push_back({{"name", s.name},
                      {"rows", s.rows},
                      {"dim", s.dim},
                      {"pooling_factor", s.pooling_factor},
                      {"data_type", data_type_name(s.data_type)}});
    if (task.no_split[t]) no_split.push_back(s.name);
  }
  json types = json::array();
  const std::string allowed = task.types.str();
  for (size_t start = 0; start < allowed.size();) {
    const size_t end = std::min(allowed.find(',', start), allowed.size());
    types.push_back(allowed.substr(start, end - start));
    start = end + 1;
  }
  return {{"format", kTaskFormat},
          {"version", kVersion},
          {"batch_size", task.batch_size},
          {"device_memory_bytes", task.device_mem_bytes},
          {"optimizer_bytes_per_row", task.memory.optimizer_bytes_per_row},
          {"optimizer_bytes_per_weight", task.memory.optimizer_bytes_per_weight},
          {"sharding_types", types},
          {"no_split", no_split},
          {"tables", tables}};
}

// A field of the peer's plan, checked: the peer is ours, but its file is
// still input.
const json& field(const json& obj, const std::string& name, const std::string& where) {
  ES_CHECK(obj.is_object() && obj.contains(name), "torchrec_planner: {}: no field '{}'", where,
           name);
  return obj.at(name);
}

int64_t integer(const json& obj, const std::string& name, const std::string& where) {
  const json& v = field(obj, name, where);
  ES_CHECK(v.is_number_integer(), "torchrec_planner: {}.{}: {} is not an integer", where, name,
           v.dump());
  return v.get<int64_t>();
}

Plan plan_from_json(const PlanTask& task, const json& doc) {
  ES_CHECK(doc.is_object() && doc.value("format", "") == kPlanFormat &&
               doc.value("version", 0) == kVersion,
           "torchrec_planner: the peer's plan is not an {} file of version {}", kPlanFormat,
           kVersion);
  const json& tables = field(doc, "tables", "plan");
  std::map<std::string, int> index;
  for (int t = 0; t < task.num_tables(); ++t) index[task.tables[t].name] = t;
  ES_CHECK(tables.is_object() && tables.size() == index.size(),
           "torchrec_planner: the peer planned {} tables of the task's {}", tables.size(),
           index.size());
  Plan plan;
  for (const auto& [name, entry] : tables.items()) {
    const auto it = index.find(name);
    ES_CHECK(it != index.end(), "torchrec_planner: the peer planned table '{}', not in the task",
             name);
    const int t = it->second;
    const TableSpec& spec = task.tables[t];
    const json& shards = field(entry, "shards", name);
    if (shards.is_null()) {  // data parallel: a copy on every device
      for (int d = 0; d < task.num_devices(); ++d) {
        plan.shards.push_back(Shard{t, 0, spec.dim, 0, spec.rows, d, true});
      }
      continue;
    }
    ES_CHECK(shards.is_array() && !shards.empty(), "torchrec_planner: {}.shards: {}", name,
             shards.dump());
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string where = fmt::format("{}.shards[{}]", name, i);
      const json& s = shards[i];
      plan.shards.push_back(Shard{t, static_cast<int>(integer(s, "col_offset", where)),
                                  static_cast<int>(integer(s, "cols", where)),
                                  integer(s, "row_offset", where), integer(s, "rows", where),
                                  static_cast<int>(integer(s, "device", where)), false});
    }
  }
  return plan;
}

class TorchrecPeerPlanner : public Planner {
 public:
  std::string name() const override { return "torchrec_planner"; }

  Plan plan(const PlanTask& task, ShardCosts&) override {
    const fs::path dir = fs::temp_directory_path() /
                         fmt::format("embshard-torchrec-{}-{}", ::getpid(), counter_++);
    fs::create_directories(dir);
    const fs::path task_path = dir / "task.json", plan_path = dir / "plan.json";
    try {
      std::ofstream(task_path) << task_json(task).dump();
      run_python_module("embshard.torchrec_peer", {task_path.string(), plan_path.string()},
                        "TorchRec's planner");
      std::ifstream in(plan_path);
      const json doc = json::parse(in, nullptr, false);
      ES_CHECK(!doc.is_discarded(), "torchrec_planner: {} is not JSON", plan_path.string());
      Plan plan = plan_from_json(task, doc);
      fs::remove_all(dir);
      return plan;
    } catch (...) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
      throw;
    }
  }

 private:
  int counter_ = 0;
};

}  // namespace

std::unique_ptr<Planner> make_torchrec_peer_planner() {
  return std::make_unique<TorchrecPeerPlanner>();
}

}  // namespace embshard
