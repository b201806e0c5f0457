// The one registry of executors.
#include <fmt/ranges.h>

#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"
#include "kernel/executor_common.h"

namespace embshard {

const std::vector<std::string>& executor_names() {
#ifdef EMBSHARD_WITH_CUDA
  static const std::vector<std::string> names = {"cpu", "cuda"};
#else
  static const std::vector<std::string> names = {"cpu"};
#endif
  return names;
}

std::unique_ptr<Executor> create_executor(const std::string& name,
                                          const ExecutorOptions& options) {
  if (name == "cpu") return make_cpu_executor(options);
  if (name == "cuda") {
    ES_CHECK(!options.thread_cpu_time,
             "executor 'cuda': thread CPU time is the cpu executor's clock (a GPU is timed by "
             "its events)");
    return make_cuda_executor(options);
  }
  ES_THROW("unknown executor '{}': valid names are {}", name, fmt::join(executor_names(), ", "));
}

#ifndef EMBSHARD_WITH_CUDA
std::unique_ptr<Executor> make_cuda_executor(const ExecutorOptions&) {
  ES_THROW("executor 'cuda': this embshard was built without CUDA (configure with "
           "-DEMBSHARD_CUDA=ON on a machine with the CUDA toolkit)");
}
#endif

}  // namespace embshard
