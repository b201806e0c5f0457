// Task files (`embshard tasks`, read by `eval`): the tasks checked against
// their pool's tables. The pool is a small workload this target writes; an
// input names it as "@POOL@", replaced by its path before the file is
// written (a real task file names an absolute path).
// fuzz-max-len: 8192
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "embshard/eval/eval.h"
#include "embshard/workload/workload.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fuzz = embshard::fuzz;

const std::string& pool_dir() {
  static const std::string dir = [] {
    embshard::Workload w;
    w.batch_size = 512;
    w.source = "fuzz pool";
    for (int t = 0; t < 6; ++t) {
      embshard::TableSpec s;
      s.name = fmt::format("p{}", t);
      s.rows = 1000 * (t + 1);
      s.dim = 16;
      s.pooling_factor = 2 + t;
      w.tables.push_back(s);
    }
    const std::string path = fuzz::scratch_path("pool");
    embshard::save_workload_specs(w, path);
    return path;
  }();
  return dir;
}

std::string with_pool(std::string_view text) {
  constexpr std::string_view kMarker = "@POOL@";
  std::string out;
  for (size_t at = 0;;) {
    const size_t found = text.find(kMarker, at);
    out.append(text.substr(at, found == std::string_view::npos ? found : found - at));
    if (found == std::string_view::npos) return out;
    out += pool_dir();
    at = found + kMarker.size();
  }
}

}  // namespace

EMBSHARD_FUZZ_TARGET(tasks, nullptr) {
  const std::string path =
      fuzz::write_scratch("tasks.json", with_pool(fuzz::text_of(data, size)));
  fuzz::expect_clean("load_tasks", [&] {
    std::string pool;
    embshard::load_tasks(path, &pool);
  });
}
