// Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/): small
// files made by embshard's own writers, and the first lines of the shipped
// data and examples. Rerunning it rewrites the same files, but for the plans'
// search times (and last digits, from another compiler).
//   embshard_fuzz_make_seeds [CORPUS_DIR]   (default: tests/fuzz/corpus)
// Built on demand in any build (cmake/fuzz.cmake, target embshard_fuzz_make_seeds).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/plan/report.h"
#include "embshard/search/planning.h"
#include "embshard/util/file.h"
#include "embshard/util/reporter.h"
#include "embshard/workload/table_specs.h"
#include "embshard/workload/trace.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"
#include "support/pt_fixture_data.h"

namespace embshard::fuzz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path corpus;
const fs::path source = EMBSHARD_SOURCE_DIR;

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = corpus / target;
  fs::create_directories(dir);
  write_file_atomic((dir / name).string(), bytes);
}

// The first `lines` lines of a (gzip'd or plain) JSON-lines file.
std::string head(const fs::path& path, int lines) {
  std::istringstream in(read_file_gunzip(path.string()));
  std::string out, line;
  for (int k = 0; k < lines && std::getline(in, line); ++k) out += line + "\n";
  return out;
}

void trace_seeds() {
  const fs::path tmp = fs::path(scratch_dir()) / "seed.bin";
  const auto write = [&](const std::string& name, uint64_t batch, uint32_t index_bytes,
                         const std::vector<TableTrace>& tables) {
    TraceWriter w(tmp.string(), tables.size(), batch, index_bytes);
    for (const TableTrace& t : tables) w.add_table(t);
    w.finish();
    put("trace", name, read_file(tmp.string()));
  };
  write("two_tables_int32.bin", 3, 4, {{{0, 1, 3, 4}, {7, 2, 2, 9}}, {{0, 0, 0, 2}, {1, 0}}});
  write("one_table_int64.bin", 1, 8, {{{0, 3}, {5, 1000000000000, 5}}});
  write("empty_table.bin", 2, 4, {{{0, 0, 0}, {}}, {{0, 1, 1}, {3}}});
}

void table_spec_seeds() {
  const std::string six = read_file((source / "examples/six_tables.json").string());
  put("table_specs", "six_tables.json", six);
  put("table_specs", "six_tables.json.gz", gzip(six));
  put("table_specs", "install_tables.json", read_file((source / "tests/install/tables.json").string()));
  // A workload's tables.json naming the trace.bin the target writes beside it.
  Workload w;
  w.batch_size = 2;
  w.source = "fuzz seed";
  w.trace_file = kTraceFile;
  for (int t = 0; t < 2; ++t) {
    TableSpec s;
    s.name = "t" + std::to_string(t);
    s.rows = 10;
    s.dim = 8;
    s.pooling_factor = 1.5;
    s.unique_rows = 2;
    s.row_reuse[0] = s.lookup_reuse[0] = 1;
    w.tables.push_back(s);
  }
  const fs::path dir = fs::path(scratch_dir()) / "workload";
  save_workload_specs(w, dir.string());
  put("table_specs", "workload_tables.json", read_file((dir / kTablesFile).string()));
  put("table_specs", "minimal.json",
      R"({"batch_size": 512, "tables": [{"name": "a", "rows": 1000, "dim": 4}, )"
      R"({"name": "b", "rows": 7, "dim": 1024, "unique_rows": 3, "row_reuse_histogram": )"
      R"([1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]})"
      "\n");
}

void pt_seeds() {
  for (const char* name : {"small_int64.pt", "small_int32.pt.gz"}) {
    put("pt", name, read_file((source / "tests/data/pt" / name).string()));
  }
  const fs::path tmp = fs::path(scratch_dir()) / "seed.pt";
  const testing::DlrmBatch d = testing::make_dlrm_batch(2, 3, 11, 2);
  testing::PtWriteOptions zip64;
  zip64.zip64 = true;
  testing::write_pt_tuple(tmp.string(), testing::batch_tensors(d, false), zip64);
  put("pt", "zip64.pt", read_file(tmp.string()));
  testing::PtWriteOptions local_sizes;
  local_sizes.data_descriptor = false;
  testing::write_pt_tuple(tmp.string(), testing::batch_tensors(d, true), local_sizes);
  put("pt", "local_sizes_int32.pt", read_file(tmp.string()));
}

void record_seeds() {
  const fs::path data = source / "data";
  put("records", "compute.jsonl", head(data / "cpu/compute_2021_b4096.jsonl.gz", 2));
  put("records", "comm.jsonl.gz", gzip(head(data / "cpu/comm_n2_b4096.jsonl.gz", 3)));
  put("records", "collectives.jsonl", head(data / "cpu/coll_n2_b4096.jsonl.gz", 3));
  put("records", "pieces.jsonl", head(data / "cpu/pieces_2021_b2048.jsonl.gz", 2));
  put("eval_records", "stress_n4.jsonl", head(data / "eval/stress_sets/e116_n4.jsonl.gz", 4));
  put("eval_records", "stress_n8.jsonl.gz",
      gzip(head(data / "eval/stress_sets/e124_n8.jsonl.gz", 3)));
}

void plan_seeds() {
  CaptureReporter quiet;
  PlanRequest r;
  r.workload = load_table_specs((source / "examples/six_tables.json").string());
  r.cost_model = "analytic";
  r.mem_per_device_bytes = int64_t{80} << 30;
  for (const auto& [algo, devices] : std::vector<std::pair<std::string, int>>{
           {"neuroshard", 4}, {"size_greedy", 2}, {"torchrec", 8}}) {
    r.algo = algo;
    r.devices = devices;
    const PlanOutcome out = plan_workload(r, quiet);
    put("plan", algo + "_" + std::to_string(devices) + ".json",
        plan_to_json(out.task, out.result).dump(1) + "\n");
  }
  // Data types, Adam's state and a reservation in the memory model.
  r.workload.tables[1].data_type = DataType::kFp16;
  r.workload.tables[2].data_type = DataType::kBf16;
  r.optimizer = OptimizerType::kAdam;
  r.algo = "neuroshard";
  r.devices = 4;
  const PlanOutcome typed = plan_workload(r, quiet);
  put("plan", "typed_adam_4.json", plan_to_json(typed.task, typed.result).dump(1) + "\n");
}

void task_seeds() {
  const json tasks = {
      {"format", "embshard-tasks"},
      {"version", 1},
      {"pool", "@POOL@"},
      {"tasks",
       {{{"tables", {0, 2, 5}}, {"dims", {16, 32, 8}}, {"mem_cap_bytes", 1000000}},
        {{"tables", {1}}, {"dims", {128}}, {"mem_cap_bytes", int64_t{1} << 40}}}}};
  put("tasks", "two_tasks.json", tasks.dump(1) + "\n");
}

void model_seeds() {
  const fs::path dir = fs::path(scratch_dir()) / "model";
  NeuralModel m = small_neural_model();
  save_neural_model(m, dir.string());
  put("model_manifest", "small.json", read_file((dir / kManifestFile).string()));
  for (const std::string& file : neural_weight_files()) {
    put("model_weights", file, read_file((dir / file).string()));
  }
  // With the training data's reference probes, as `train` writes them.
  const json shipped = json::parse(read_file((source / "models/neural/manifest.json").string()));
  m.info["data"] = {{"compute", {shipped["data"]["compute"][0]}},
                    {"comm", {shipped["data"]["comm"][0]}}};
  m.info["data"]["comm"][0]["batch"] = 1024;
  save_neural_model(m, dir.string());
  put("model_manifest", "with_data.json", read_file((dir / kManifestFile).string()));
  m.has_comm = false;
  m.info = json::object();
  save_neural_model(m, (dir / "compute_only").string());
  put("model_manifest", "compute_only.json",
      read_file((dir / "compute_only" / kManifestFile).string()));
}

void policy_seeds() {
  for (const PolicyKind kind : {PolicyKind::kAutoShard, PolicyKind::kDreamShard}) {
    const fs::path dir = fs::path(scratch_dir()) / policy_kind_name(kind);
    save_policy(small_policy(kind), dir.string());
    put("policy_manifest", policy_kind_name(kind) + ".json",
        read_file((dir / "manifest.json").string()));
    for (const std::string& file : policy_weight_files(kind)) {
      put("policy_weights", policy_kind_name(kind) + "_" + file,
          read_file((dir / file).string()));
    }
  }
}

void calibration_seeds() {
  put("calibration", "analytic.json", read_file((source / "models/analytic.json").string()));
  put("calibration", "h100_comm.json", read_file((source / "models/h100/comm.json").string()));
  Calibration c;
  c.machine_cpu = "seed";
  c.fwd_call_us = c.bwd_call_us = 10;
  for (double* v : {&c.fwd_per_table_us, &c.fwd_per_lookup_ns, &c.dram_gather_gbps,
                    &c.cache_gather_gbps, &c.seq_gbps, &c.bwd_per_table_us, &c.bwd_per_lookup_ns,
                    &c.grad_read_gbps, &c.dram_update_gbps, &c.cache_update_gbps, &c.comm_gbps}) {
    *v = 1;
  }
  put("calibration", "plain.json", calibration_to_json(c).dump(1) + "\n");
}

}  // namespace
}  // namespace embshard::fuzz

int main(int argc, char** argv) {
  using namespace embshard::fuzz;
  setenv("EMBSHARD_DATA_DIR", EMBSHARD_SOURCE_DIR, 0);
  corpus = argc > 1 ? fs::path(argv[1]) : fs::path(EMBSHARD_FUZZ_DIR) / "corpus";
  try {
    trace_seeds();
    table_spec_seeds();
    pt_seeds();
    record_seeds();
    plan_seeds();
    task_seeds();
    model_seeds();
    policy_seeds();
    calibration_seeds();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  std::printf("seeds written under %s\n", corpus.string().c_str());
  return 0;
}
