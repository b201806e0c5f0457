// Task sets for evaluation: NeuroShard's task generator.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "embshard/eval/eval.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"

namespace embshard {

using nlohmann::json;

std::vector<EvalTask> generate_tasks(const Workload& pool, const TaskGenOptions& o) {
  const int pool_size = static_cast<int>(pool.tables.size());
  if (o.whole_pool) {
    ES_CHECK(o.mem_cap_bytes > 0, "tasks: --mem-cap is {}, must be positive", o.mem_cap_bytes);
    EvalTask task;
    task.mem_cap_bytes = o.mem_cap_bytes;
    for (int t = 0; t < pool_size; ++t) {
      task.tables.push_back(t);
      task.dims.push_back(pool.tables[t].dim);
    }
    return {task};
  }
  ES_CHECK(o.min_tables >= 1 && o.max_tables >= o.min_tables,
           "tasks: --tables {}-{}: need 1 <= min <= max", o.min_tables, o.max_tables);
  ES_CHECK(o.min_tables <= pool_size, "tasks: --tables asks for at least {} tables, the pool '{}' "
           "has {}", o.min_tables, pool.dir, pool_size);
  ES_CHECK(!o.dims.empty(), "tasks: --dims is empty");
  for (int d : o.dims) ES_CHECK(d >= 1 && d <= 1024, "tasks: --dims holds {}, not in 1..1024", d);
  ES_CHECK(o.mem_cap_bytes > 0, "tasks: --mem-cap is {}, must be positive", o.mem_cap_bytes);
  ES_CHECK(o.count >= 1, "tasks: --count is {}, must be at least 1", o.count);
  std::mt19937_64 rng(o.seed);
  std::vector<EvalTask> tasks;
  std::uniform_int_distribution<size_t> pick_dim(0, o.dims.size() - 1);
  for (int i = 0; i < o.count; ++i) {
    const int wanted = std::uniform_int_distribution<int>(
        o.min_tables, std::min(o.max_tables, pool_size))(rng);
    std::vector<int> order(pool_size);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    EvalTask task;
    task.mem_cap_bytes = o.mem_cap_bytes;
    // Tables that do not fit one device at their dim are skipped, as in
    // NeuroShard's generator: every task is feasible table by table.
    for (int t : order) {
      if (static_cast<int>(task.tables.size()) == wanted) break;
      const int dim = o.dims[pick_dim(rng)];
      // With `oversized`, only a table whose 4-column piece cannot fit is skipped.
      if (pool.tables[t].rows * int64_t{o.oversized ? 4 : dim} * 4 > o.mem_cap_bytes) continue;
      task.tables.push_back(t);
      task.dims.push_back(dim);
    }
    ES_CHECK(!task.tables.empty(), "tasks: no table of '{}' fits --mem-cap {} bytes", pool.dir,
             o.mem_cap_bytes);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

void save_tasks(const std::string& path, const std::string& pool_dir,
                const std::vector<EvalTask>& tasks) {
  json list = json::array();
  for (const EvalTask& t : tasks) {
    list.push_back({{"tables", t.tables}, {"dims", t.dims}, {"mem_cap_bytes", t.mem_cap_bytes}});
  }
  const json j{{"format", "embshard-tasks"},
               {"version", 1},
               {"pool", std::filesystem::absolute(pool_dir).lexically_normal().string()},
               {"tasks", list}};
  write_file_atomic(path, j.dump(1) + "\n");
}

namespace {

// Field `field` of tasks[i]: integers in [lo, hi] (a value such as 3.9 or
// 2^32 + 5 is an error, never truncated).
std::vector<int64_t> integers(const json& t, const char* field, const std::string& path, size_t i,
                              int64_t lo, int64_t hi) {
  ES_CHECK(t.is_object() && t.contains(field), "{}: tasks[{}]: missing field '{}'", path, i, field);
  const json& v = t[field];
  const bool array = v.is_array();
  std::vector<int64_t> out;
  for (size_t k = 0; k < (array ? v.size() : 1); ++k) {
    const json& x = array ? v[k] : v;
    const std::string where = array ? fmt::format("{}[{}]", field, k) : field;
    ES_CHECK(x.is_number_integer() && !(x.is_number_unsigned() && x.get<uint64_t>() > static_cast<uint64_t>(hi)) &&
                 x.get<int64_t>() >= lo && x.get<int64_t>() <= hi,
             "{}: field 'tasks[{}].{}' is {}, expected an integer in {}..{}", path, i, where, x.dump(), lo, hi);
    out.push_back(x.get<int64_t>());
  }
  return out;
}

}  // namespace

std::vector<EvalTask> load_tasks(const std::string& path, std::string* pool_dir) {
  const json j = parse_json_document(read_file(path), path);
  const auto field = [&](const char* key) {
    return j.is_object() && j.contains(key) ? json_shown(j[key]) : "missing";
  };
  ES_CHECK(j.is_object() && j.contains("format") && j["format"] == "embshard-tasks" &&
               j.contains("version") && j["version"] == 1,
           "{}: not an embshard task file (format \"embshard-tasks\", version 1): format is {}, "
           "version {}",
           path, field("format"), field("version"));
  ES_CHECK(j.contains("pool") && j["pool"].is_string(),
           "{}: field 'pool' is {}, expected the pool's workload directory (a string)", path,
           field("pool"));
  const std::string pool = j["pool"].get<std::string>();
  if (pool_dir != nullptr) *pool_dir = pool;
  // Named here, with the file that names it: the pool's own reader would
  // name only the directory.
  ES_CHECK(file_exists((std::filesystem::path(pool) / kTablesFile).string()),
           "{}: field 'pool' is '{}', which holds no {} (the task file's table ids index the "
           "tables of that workload directory)",
           path, pool, kTablesFile);
  const Workload w = load_workload(pool);
  std::vector<EvalTask> tasks;
  ES_CHECK(j.contains("tasks") && j["tasks"].is_array(), "{}: missing array 'tasks'", path);
  ES_CHECK(!j["tasks"].empty(), "{}: field 'tasks' is empty: no task to run", path);
  for (size_t i = 0; i < j["tasks"].size(); ++i) {
    const json& t = j["tasks"][i];
    EvalTask task;
    ES_CHECK(t.is_object() && t.contains("tables") && t["tables"].is_array() && t.contains("dims") &&
                 t["dims"].is_array(),
             "{}: tasks[{}] is {}, expected an object with arrays 'tables' and 'dims'", path, i,
             json_shown(t));
    for (int64_t v : integers(t, "tables", path, i, 0, std::numeric_limits<int>::max())) {
      task.tables.push_back(static_cast<int>(v));
    }
    for (int64_t v : integers(t, "dims", path, i, 1, 1024)) task.dims.push_back(static_cast<int>(v));
    ES_CHECK(!t.contains("mem_cap_bytes") || !t["mem_cap_bytes"].is_array(),
             "{}: field 'tasks[{}].mem_cap_bytes' is {}, expected one integer (bytes per device)",
             path, i, json_shown(t["mem_cap_bytes"]));
    task.mem_cap_bytes =
        integers(t, "mem_cap_bytes", path, i, 1, std::numeric_limits<int64_t>::max()).front();
    ES_CHECK(!task.tables.empty() && task.tables.size() == task.dims.size(),
             "{}: tasks[{}]: {} tables and {} dims", path, i, task.tables.size(), task.dims.size());
    for (size_t k = 0; k < task.tables.size(); ++k) {
      ES_CHECK(task.tables[k] >= 0 && task.tables[k] < static_cast<int>(w.tables.size()),
               "{}: tasks[{}].tables[{}] = {} is out of range: the pool '{}' has {} tables", path,
               i, k, task.tables[k], pool, w.tables.size());
      const auto first = std::find(task.tables.begin(), task.tables.end(), task.tables[k]);
      ES_CHECK(first - task.tables.begin() == static_cast<ptrdiff_t>(k),
               "{}: tasks[{}].tables[{}] = {}, as tables[{}]: a task holds a table once", path, i,
               k, task.tables[k], first - task.tables.begin());
    }
    tasks.push_back(std::move(task));
  }
  return tasks;
}

}  // namespace embshard
