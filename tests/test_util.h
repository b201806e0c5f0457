// Helpers shared by the tests: scratch directories and running the CLI.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <string>

#include "embshard/util/error.h"
#include "embshard/workload/workload.h"

namespace embshard::testing {

// The message of the embshard::Error that `fn` throws; "" when it throws none.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A fresh directory under the system temp dir, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    path_ = std::filesystem::temp_directory_path() /
            ("embshard_test_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, stdout and stderr together. A test ctest
// labels `unit` may not (cmake/test_labels.cmake): its name takes "Cli".
inline CommandResult run_shell(const std::string& command_line) {
  if (const char* label = std::getenv("EMBSHARD_TEST_LABEL"); label && std::string(label) == "unit") {
    return {-1, "a test labelled unit runs a command (put Cli in its name, cmake/test_labels.cmake): " +
                    command_line};
  }
  const std::string command = command_line + " 2>&1";
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Runs the embshard CLI with `args` (a shell-quoted string).
inline CommandResult run_cli(const std::string& args) {
  return run_shell(std::string(EMBSHARD_CLI_PATH) + " " + args);
}

inline bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// The CLI under `mpirun -np ranks` (as root, oversubscribed), bounded by
// `timeout` so that a broken run fails instead of hanging.
inline CommandResult run_mpi_cli(int ranks, const std::string& args, int timeout_s = 90) {
  return run_shell("timeout -k 5 " + std::to_string(timeout_s) +
                   " mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(ranks) +
                   " " + EMBSHARD_CLI_PATH + " " + args);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void spit(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

// A small workload on disk: table t has first_rows + rows_step * t rows (all
// distinct, as the measured cost model matches tables by rows), dim 16, and
// min_bag + bag_step * (t % bag_cycle) uniform lookups in every bag.
struct TestWorkloadShape {
  int tables = 8;
  int64_t batch = 64;
  int64_t first_rows = 100, rows_step = 1000;
  int min_bag = 1, bag_step = 1, bag_cycle = 4;
  uint64_t seed = 1;
};

inline Workload write_test_workload(const ScratchDir& dir, const TestWorkloadShape& shape) {
  std::mt19937_64 rng(shape.seed);
  Workload w;
  w.batch_size = shape.batch;
  w.source = "test";
  w.trace_file = kTraceFile;
  TraceWriter writer(dir.file(kTraceFile), shape.tables, w.batch_size, 4);
  for (int t = 0; t < shape.tables; ++t) {
    TableSpec spec;
    spec.name = fmt::format("t{}", t);  // "t" + std::to_string(t): a false -Wrestrict in GCC 12
    spec.rows = shape.first_rows + shape.rows_step * t;
    spec.dim = 16;
    TableTrace trace;
    trace.offsets.push_back(0);
    std::uniform_int_distribution<int64_t> row(0, spec.rows - 1);
    const int bag = shape.min_bag + shape.bag_step * (t % shape.bag_cycle);
    for (int64_t b = 0; b < w.batch_size; ++b) {
      for (int i = 0; i < bag; ++i) trace.indices.push_back(row(rng));
      trace.offsets.push_back(static_cast<int64_t>(trace.indices.size()));
    }
    spec.pooling_factor = static_cast<double>(trace.indices.size()) / w.batch_size;
    spec.row_reuse[0] = spec.lookup_reuse[0] = 1;
    writer.add_table(trace);
    w.tables.push_back(spec);
  }
  writer.finish();
  save_workload_specs(w, dir.path().string());
  return load_workload(dir.path().string());
}

}  // namespace embshard::testing
