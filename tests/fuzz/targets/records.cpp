// Measurement records (`bench compute`, `bench comm`, `bench comm
// --collectives` files: JSON lines, gzip'd or not): the cost data loaders
// (both checking modes), the record file reader, `bench ... --show`'s tables,
// the probe reference, and the resume of a run into the file.
// fuzz-max-len: 16384
#include <nlohmann/json.hpp>

#include "embshard/bench/comm.h"
#include "embshard/bench/compute.h"
#include "embshard/cost/cost_data.h"
#include "embshard/util/record_file.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fuzz = embshard::fuzz;
using embshard::LoadOptions;
using embshard::RecordCheck;

}  // namespace

EMBSHARD_FUZZ_TARGET(records, nullptr) {
  const std::string path = fuzz::write_scratch("records.jsonl", data, size);
  fuzz::expect_clean("detect_cost_data_kind", [&] { embshard::detect_cost_data_kind(path); });
  for (const RecordCheck check : {RecordCheck::kSkipBad, RecordCheck::kStrict}) {
    LoadOptions o;
    o.check = check;
    fuzz::expect_clean("load_compute_data", [&] { embshard::load_compute_data(path, o); });
    fuzz::expect_clean("load_comm_data", [&] { embshard::load_comm_data(path, o); });
    fuzz::expect_clean("load_collective_data", [&] { embshard::load_collective_data(path, o); });
  }
  fuzz::expect_clean("RecordFile::read_all", [&] {
    nlohmann::json header;
    uint64_t dropped = 0;
    embshard::RecordFile::read_all(path, &header, &dropped);
  });
  fuzz::expect_clean("compute_records_table",
                     [&] { embshard::compute_records_table(path, 3); });
  fuzz::expect_clean("comm_records_table", [&] { embshard::comm_records_table(path, 3); });
  fuzz::expect_clean("probe_reference_of_file",
                     [&] { embshard::probe_reference_of_file(path, "cpu"); });
  // Resuming a run: the file is reopened for appending (and its torn tail cut).
  const std::string resumed = fuzz::write_scratch("resumed.jsonl", data, size);
  fuzz::expect_clean("RecordFile", [&] {
    const nlohmann::json header = {{"format", embshard::kComputeFormat}, {"version", 2}};
    embshard::RecordFile file(resumed, header, {"format", "version"});
    file.check_numbered();
  });
}
