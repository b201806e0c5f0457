// Table specs: a table-spec file (`plan --tables`, gzip'd or not) and a
// workload's tables.json (`load_workload`, with a small valid trace.bin beside
// it), each then inspected as `embshard inspect` does.
// fuzz-max-len: 16384
#include <nlohmann/json.hpp>

#include "embshard/workload/inspect.h"
#include "embshard/workload/table_specs.h"
#include "embshard/workload/trace.h"
#include "embshard/workload/workload.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fuzz = embshard::fuzz;

// trace.bin of two tables at batch 2, beside the fuzzed tables.json.
void write_trace_once() {
  static const bool written = [] {
    embshard::TraceWriter writer(fuzz::scratch_path("specs/trace.bin"), 2, 2, 4);
    writer.add_table({{0, 1, 3}, {0, 1, 1}});
    writer.add_table({{0, 0, 2}, {5, 5}});
    writer.finish();
    return true;
  }();
  (void)written;
}

// A trace named by a path, not a file name beside tables.json, would have
// the workload reader open whatever the input names (a device, a FIFO).
bool names_a_file_beside(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("trace") || !j["trace"].is_string()) return true;
  const std::string name = j["trace"].get<std::string>();
  return name.find('/') == std::string::npos && name != "..";
}

}  // namespace

EMBSHARD_FUZZ_TARGET(table_specs, nullptr) {
  write_trace_once();
  const std::string path = fuzz::write_scratch("specs/tables.json", data, size);
  fuzz::expect_clean("load_table_specs", [&] {
    const embshard::Workload w = embshard::load_table_specs(path, "2021");
    embshard::inspection_text(embshard::inspect_specs(w, ""));
  });
  if (!names_a_file_beside(fuzz::text_of(data, size))) return;
  fuzz::expect_clean("load_workload", [&] {
    const embshard::WorkloadInspection in =
        embshard::inspect_workload(fuzz::scratch_path("specs"), "", "");
    embshard::inspection_text(in);
  });
}
