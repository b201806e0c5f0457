// Plans a few tables of the built-in workload on two devices with the shipped
// neural cost model, as a program linked with an installed embshard would.
// Prints the data root it found and the predicted cost; exits non-zero with
// the library's message on any error.
#include <cstdio>
#include <exception>

#include "embshard/search/planning.h"
#include "embshard/util/data_dir.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/table_specs.h"

int main() {
  try {
    embshard::PlanRequest request;
    request.workload = embshard::default_workload(/*num_tables=*/6, /*batch_size=*/1024);
    request.devices = 2;
    request.mem_per_device_bytes = int64_t{8} << 30;
    request.cost_model = "neural";
    embshard::CaptureReporter notes;
    const embshard::PlanOutcome outcome = embshard::plan_workload(request, notes);
    std::printf("data root: %s\n", embshard::data_root().c_str());
    std::printf("cost model: %s\n", outcome.result.cost_model.c_str());
    std::printf("shards: %zu\n", outcome.result.plan.shards.size());
    std::printf("predicted cost: %.6f ms\n", outcome.result.predicted.cost_ms);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plan_tables: %s\n", e.what());
    return 1;
  }
}
