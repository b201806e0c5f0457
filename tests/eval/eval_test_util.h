// Pools and task files for the eval tests.
#pragma once

#include <string>

#include "embshard/eval/eval.h"
#include "test_util.h"

namespace embshard::testing {

// A test workload of `tables` tables in `dir`; its directory.
inline std::string make_pool(const ScratchDir& dir, int tables) {
  return write_test_workload(dir, {tables, 64, 64, 997, 1, 1, 6, 3}).dir;
}

inline TaskGenOptions task_options(const std::string& pool_dir, int min_tables, int max_tables,
                                   int64_t mem_cap_bytes, int count) {
  TaskGenOptions o;
  o.pool_dir = pool_dir;
  o.min_tables = min_tables;
  o.max_tables = max_tables;
  o.mem_cap_bytes = mem_cap_bytes;
  o.count = count;
  return o;
}

// `count` tasks of min..max tables of a `pool_tables`-table pool, 32 MiB a
// device, saved as dir/tasks.json; its path.
inline std::string make_tasks(const ScratchDir& dir, int pool_tables = 16, int min_tables = 6,
                              int max_tables = 10, int count = 3) {
  const std::string pool_dir = make_pool(dir, pool_tables);
  const std::string path = dir.file("tasks.json");
  save_tasks(path, pool_dir,
             generate_tasks(load_workload(pool_dir),
                            task_options(pool_dir, min_tables, max_tables, 32 << 20, count)));
  return path;
}

}  // namespace embshard::testing
