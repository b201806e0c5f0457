#include "embshard/bench/compute.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "embshard/util/error.h"
#include "embshard/util/machine.h"
#include "embshard/util/reporter.h"
#include "embshard/util/random.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"

namespace embshard {
namespace {

using nlohmann::json;

const char* optimizer_name(OptimizerType type) {
  return type == OptimizerType::kSgd ? "sgd" : "rowwise_adagrad";
}

void check_options(const Workload& workload, const ComputeBenchOptions& o) {
  ES_CHECK(o.samples >= 0, "bench compute: --samples is {}, must be >= 0", o.samples);
  ES_CHECK(o.max_tables >= 1, "bench compute: --max-tables is {}, must be >= 1", o.max_tables);
  ES_CHECK(o.mem_cap_bytes > 0, "bench compute: --mem-cap is {}, must be positive",
           o.mem_cap_bytes);
  ES_CHECK(o.threads >= 1, "bench compute: --threads is {}, must be >= 1", o.threads);
  ES_CHECK(o.repeats >= 1 && o.warmup >= 0, "bench compute: --repeats {} / --warmup {} invalid",
           o.repeats, o.warmup);
  ES_CHECK(!o.dims.empty(), "bench compute: --dims is empty");
  for (int dim : o.dims) {
    ES_CHECK(dim >= 1 && dim <= 1024, "bench compute: --dims holds {}, dims must be in 1..1024",
             dim);
  }
  ES_CHECK(!workload.tables.empty(), "bench compute: workload '{}' has no tables",
           workload.dir);
  const int min_dim = *std::min_element(o.dims.begin(), o.dims.end());
  auto smallest = std::min_element(
      workload.tables.begin(), workload.tables.end(),
      [](const TableSpec& a, const TableSpec& b) { return a.rows < b.rows; });
  ES_CHECK(smallest->rows * int64_t{min_dim} * 4 <= o.mem_cap_bytes,
           "bench compute: no shard can fit the memory cap: the smallest table '{}' needs {} "
           "bytes at dim {}, --mem-cap is {} bytes",
           smallest->name, smallest->rows * int64_t{min_dim} * 4, min_dim, o.mem_cap_bytes);
}

json table_record(const Workload& workload, const ShardTable& t) {
  const TableSpec& spec = workload.tables[t.table];
  return {{"table", t.table},
          {"name", spec.name},
          {"rows", spec.rows},
          {"dim", t.dim},
          {"pooling_factor", spec.pooling_factor},
          {"unique_rows", spec.unique_rows},
          {"row_reuse_histogram", spec.row_reuse},
          {"lookup_reuse_histogram", spec.lookup_reuse}};
}

}  // namespace

std::vector<ShardTable> draw_shard(const Workload& workload, const ComputeBenchOptions& options,
                                   int64_t index) {
  std::mt19937_64 rng(item_seed(options.seed, static_cast<uint64_t>(index)));
  const int pool = static_cast<int>(workload.tables.size());
  const int wanted = std::uniform_int_distribution<int>(1, options.max_tables)(rng);
  std::vector<int> order(pool);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_int_distribution<size_t> pick_dim(0, options.dims.size() - 1);
  std::vector<ShardTable> shard;
  int64_t used_bytes = 0;
  for (int table : order) {
    if (static_cast<int>(shard.size()) == wanted) break;
    const int dim = options.dims[pick_dim(rng)];
    const int64_t bytes = workload.tables[table].rows * int64_t{dim} * 4;
    if (used_bytes + bytes > options.mem_cap_bytes) continue;
    used_bytes += bytes;
    shard.push_back({table, dim});
  }
  if (shard.empty()) {
    // Every draw was too big: fall back to the smallest table at the smallest dim
    // (check_options guarantees that it fits).
    const int smallest = static_cast<int>(std::min_element(workload.tables.begin(),
                                                           workload.tables.end(),
                                                           [](auto& a, auto& b) {
                                                             return a.rows < b.rows;
                                                           }) -
                                          workload.tables.begin());
    shard.push_back({smallest, *std::min_element(options.dims.begin(), options.dims.end())});
  }
  return shard;
}

ShardTimerOptions shard_timer_options(const ComputeBenchOptions& o) {
  ShardTimerOptions t;
  t.warmup = o.warmup;
  t.repeats = o.repeats;
  t.pooling = o.pooling;
  t.optimizer = o.optimizer;
  return t;
}

json compute_bench_header(const Workload& workload, const ComputeBenchOptions& o,
                          const std::string& executor) {
  return {{"format", "embshard-compute-costs"},
          {"version", 1},
          {"embshard_version", EMBSHARD_VERSION},
          {"machine", machine_info()},
          {"workload", std::filesystem::absolute(workload.dir).lexically_normal().string()},
          {"workload_source", workload.source},
          {"num_pool_tables", workload.tables.size()},
          {"batch_size", workload.batch_size},
          {"executor", executor},
          {"threads", o.threads},
          {"seed", o.seed},
          {"dims", o.dims},
          {"max_tables", o.max_tables},
          {"mem_cap_bytes", o.mem_cap_bytes},
          {"warmup", o.warmup},
          {"repeats", o.repeats},
          {"optimizer", optimizer_name(o.optimizer)},
          {"pooling", o.pooling == PoolingMode::kSum ? "sum" : "mean"}};
}

int64_t run_compute_bench(const ComputeBenchOptions& options, Reporter& reporter) {
  const Workload workload = load_workload(options.workload_dir);
  check_options(workload, options);
  ExecutorOptions eo;
  eo.threads = options.threads;
  const std::unique_ptr<Executor> executor = create_executor(options.executor, eo);
  RecordFile out(options.out_path, compute_bench_header(workload, options, executor->name()),
                 {"format", "version", "machine", "workload", "batch_size", "executor",
                  "threads", "seed", "dims", "max_tables", "mem_cap_bytes", "warmup", "repeats",
                  "optimizer", "pooling"});
  if (out.dropped_bytes() > 0) {
    reporter.note(fmt::format("bench compute: dropped a torn last record ({} bytes) from {}",
                              out.dropped_bytes(), options.out_path));
  }
  // Records are numbered 0, 1, ...: anything else means a foreign or edited file.
  const auto& existing = out.records();
  for (size_t i = 0; i < existing.size(); ++i) {
    ES_CHECK(existing[i].value("sample", int64_t{-1}) == static_cast<int64_t>(i),
             "{}: record {} has sample {}, expected {}: the file is not a clean run", 
             options.out_path, i + 1, existing[i].value("sample", json()).dump(), i);
  }
  int64_t next = static_cast<int64_t>(existing.size());
  if (next >= options.samples) return next;

  ShardTimer timer(workload, *executor, shard_timer_options(options));
  Progress progress(reporter, "bench compute", static_cast<uint64_t>(options.samples),
                    static_cast<uint64_t>(next));
  for (; next < options.samples; ++next) {
    const std::vector<ShardTable> shard = draw_shard(workload, options, next);
    const ShardTiming timing = timer.time(shard);
    json tables = json::array();
    for (const ShardTable& t : shard) tables.push_back(table_record(workload, t));
    out.append({{"sample", next},
                {"tables", tables},
                {"fwd_ms", timing.fwd_ms},
                {"bwd_ms", timing.bwd_ms},
                {"ms", timing.total_ms}});
    progress.update(static_cast<uint64_t>(next + 1),
                    fmt::format("last {} tables {:.2f} ms", shard.size(), timing.total_ms));
  }
  progress.finish();
  return next;
}

// The last `show` records of a cost file as a table.
std::string compute_records_table(const std::string& path, int64_t show) {
  nlohmann::json header;
  const auto records = RecordFile::read_all(path, &header, nullptr);
  TextTable table({"sample", "tables", "dims", "rows", "pooling", "weights MB", "fwd ms",
                   "bwd+upd ms", "total ms"});
  const size_t first = records.size() > static_cast<size_t>(show) ? records.size() - show : 0;
  for (size_t i = first; i < records.size(); ++i) {
    const auto& r = records[i];
    std::string dims;
    int64_t rows = 0;
    double pooling = 0, bytes = 0;
    for (const auto& t : r["tables"]) {
      dims += (dims.empty() ? "" : ",") + std::to_string(t["dim"].get<int>());
      rows += t["rows"].get<int64_t>();
      pooling += t["pooling_factor"].get<double>();
      bytes += t["rows"].get<double>() * t["dim"].get<double>() * 4;
    }
    if (dims.size() > 28) dims = dims.substr(0, 25) + "...";
    table.add_row({std::to_string(r["sample"].get<int64_t>()),
                   std::to_string(r["tables"].size()), dims, std::to_string(rows),
                   fmt::format("{:.1f}", pooling), fmt::format("{:.1f}", bytes / 1e6),
                   fmt::format("{:.3f}", r["fwd_ms"].get<double>()),
                   fmt::format("{:.3f}", r["bwd_ms"].get<double>()),
                   fmt::format("{:.3f}", r["ms"].get<double>())});
  }
  return fmt::format("{} shard costs in {} (batch {}, {} thread(s), median of {} runs after {} "
                     "warm-up){}\n{}",
                     records.size(), path, header.value("batch_size", 0),
                     header.value("threads", 0), header.value("repeats", 0),
                     header.value("warmup", 0),
                     first > 0 ? fmt::format("; the last {}:", records.size() - first) : ":",
                     table.render());
}

}  // namespace embshard
