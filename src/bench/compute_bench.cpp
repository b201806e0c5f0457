#include "embshard/bench/compute.h"

#include "embshard/workload/stats.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/anchors.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/neural/model.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/machine.h"
#include "embshard/util/reporter.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"

namespace embshard {

void check_compute_bench_options(const ComputeBenchOptions& o) {
  ES_CHECK(o.samples >= 0, "bench compute: --samples is {}, must be >= 0", o.samples);
  ES_CHECK(o.max_tables >= 1, "bench compute: --max-tables is {}, must be >= 1", o.max_tables);
  ES_CHECK(o.mem_cap_bytes > 0, "bench compute: --mem-cap is {}, must be positive",
           o.mem_cap_bytes);
  ES_CHECK(o.threads >= 1, "bench compute: --threads is {}, must be >= 1", o.threads);
  ES_CHECK(o.piece_share >= 0 && o.piece_share <= 1,
           "bench compute: --pieces is {}, must be in [0, 1]", o.piece_share);
  ES_CHECK(o.warmup >= 0 && o.min_rounds >= 2 && o.max_rounds >= o.min_rounds &&
               o.target_relative_half_width > 0 && o.reference_window_s >= 0,
           "bench compute: --warmup {} / --min-rounds {} / --max-rounds {} / --target-ci {} / "
           "--reference-window-s {} invalid (need >= 0, >= 2, >= min rounds, > 0, >= 0)",
           o.warmup, o.min_rounds, o.max_rounds, o.target_relative_half_width,
           o.reference_window_s);
  ES_CHECK(!o.dims.empty(), "bench compute: --dims is empty");
  for (DataType type : o.data_types) {
    ES_CHECK(data_type_trains(type),
             "bench compute: --data-types holds {}: a sample is a training step, and {} tables "
             "are forward only (fp32, fp16 or bf16)",
             data_type_name(type), data_type_name(type));
    ES_CHECK(type == DataType::kFp32 || o.executor == "cpu",
             "bench compute: --data-types holds {}: the {} executor runs fp32 tables only",
             data_type_name(type), o.executor);
  }
  for (int dim : o.dims) {
    ES_CHECK(dim >= 1 && dim <= 1024, "bench compute: --dims holds {}, dims must be in 1..1024",
             dim);
  }
}

namespace {

using nlohmann::json;

const char* optimizer_name(OptimizerType type) {
  return type == OptimizerType::kSgd ? "sgd" : "rowwise_adagrad";
}

void check_options(const Workload& workload, const ComputeBenchOptions& o) {
  check_compute_bench_options(o);
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

json table_record(ShardTimer& timer, const ShardTable& t) {
  const Workload& workload = timer.workload();
  TableSpec spec = workload.tables[t.table];
  const bool piece = t.rows > 0 || t.batch_slices > 1;
  if (piece) {
    // A piece's features are measured on its own lookups, not assumed.
    const int64_t rows = t.rows > 0 ? t.rows : spec.rows;
    fill_table_spec(compute_table_stats(timer.piece_trace(t), rows, "bench compute: piece of " + spec.name),
                    spec);
    spec.rows = rows;
  }
  spec.data_type = t.data_type;
  json j = table_to_json(spec);
  j["table"] = t.table;
  j["dim"] = t.dim;
  if (t.rows > 0) j["row_offset"] = t.row_offset;
  if (t.batch_slices > 1) j["batch_slice"] = {t.batch_slice, t.batch_slices};
  return j;
}

}  // namespace

std::vector<ShardTable> draw_shard(const Workload& workload, const ComputeBenchOptions& options,
                                   int64_t index) {
  return draw_shard(workload, shard_draw(options), index);
}

ShardDraw shard_draw(const ComputeBenchOptions& o) {
  return {o.max_tables, o.mem_cap_bytes, o.dims, o.piece_share, o.seed, o.data_types};
}

std::unique_ptr<Executor> create_executor(const ComputeBenchOptions& o) {
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.thread_cpu_time = o.thread_cpu_time;
  return create_executor(o.executor, eo);
}

ShardTimerOptions shard_timer_options(const ComputeBenchOptions& o) {
  ShardTimerOptions t;
  t.warmup = o.warmup;
  t.pooling = o.pooling;
  t.optimizer = o.optimizer;
  t.interleave.min_rounds = o.min_rounds;
  t.interleave.max_rounds = o.max_rounds;
  t.interleave.target_relative_half_width = o.target_relative_half_width;
  t.interleave.seed = o.seed;
  t.reference.min_window_ms = 1e3 * o.reference_window_s;
  return t;
}

ProbeReference probe_reference_of_file(const std::string& path, const std::string& executor) {
  json header;
  RecordFile::read_all(path, &header, nullptr);
  const json format = header.value("format", json()), version = header.value("version", json());
  ES_CHECK(format == kComputeFormat,
           "{}: format is {}, expected '{}' (a file of `embshard bench compute`)", path,
           format.dump(), kComputeFormat);
  ES_CHECK(version.is_number_integer() && version.get<int>() >= 2 && header.contains("probe"),
           "{}: a version {} file holds no probe reference (re-measure it with this embshard)",
           path, version.dump());
  const json* recorded = json_optional(header, "/executor", JsonKind::kString, path);
  ES_CHECK(!recorded || recorded->get<std::string>() == executor,
           "{}: field 'executor' is '{}', this run's is '{}': a probe reference of another "
           "executor or clock is another scale",
           path, recorded ? recorded->get<std::string>() : "", executor);
  return probe_reference_from_json(header, "/probe/reference", path);
}

namespace {

// The header line's identity: machine, batch, executor, version, options and
// the reference probe (with its reference time).
json compute_bench_header(const Workload& workload, const ComputeBenchOptions& o,
                          Executor& executor, const json& reference, const json& scale) {
  json probe = reference_probe_json();
  probe["reference"] = reference;
  json header = {{"format", kComputeFormat},
                 {"version", kCostDataVersion},
                 {"embshard_version", EMBSHARD_VERSION},
                 {"machine", machine_info()},
                 {"workload", std::filesystem::absolute(workload.dir).lexically_normal().string()},
                 {"workload_source", workload.source},
                 {"num_pool_tables", workload.tables.size()},
                 {"batch_size", workload.batch_size},
                 {"executor", executor.name()},
                 {"copy_gbps", executor.copy_gbps()},  // for physical floors (cost/floor.h)
                 {"threads", o.threads},
                 {"seed", o.seed},
                 {"dims", o.dims},
                 {"max_tables", o.max_tables},
                 {"mem_cap_bytes", o.mem_cap_bytes},
                 {"warmup", o.warmup},
                 {"min_rounds", o.min_rounds},
                 {"max_rounds", o.max_rounds},
                 {"target_relative_half_width", o.target_relative_half_width},
                 {"optimizer", optimizer_name(o.optimizer)},
                 {"pooling", o.pooling == PoolingMode::kSum ? "sum" : "mean"},
                 {"probe", probe},
                 {"scale", scale}};
  if (o.piece_share > 0) header["piece_share"] = o.piece_share;  // absent: whole tables
  if (!o.data_types.empty()) {                                   // absent: the workload's own types
    json types = json::array();
    for (DataType type : o.data_types) types.push_back(data_type_name(type));
    header["data_types"] = types;
  }
  return header;
}

// Sets the timer's probe reference and returns how (the header's "scale"): a
// resumed file keeps its own, --reference-from takes another file's, else
// anchors priced by the model or the probe's quiet time over a window.
json set_file_scale(const Workload& workload, const ComputeBenchOptions& o, Executor& executor,
                    ShardTimer& timer, Reporter& reporter) {
  const std::string& from = has_records(o.out_path) ? o.out_path : o.reference_from;
  if (!from.empty()) {
    timer.set_probe_reference(probe_reference_of_file(from, executor.name()));
    json header;
    RecordFile::read_all(from, &header, nullptr);
    json scale = header.value("scale", json{{"method", "window"}});  // absent: older files
    ES_CHECK(scale.is_object(), "{}: field 'scale' is {}, expected an object", from, scale.dump());
    if (from != o.out_path) scale["from"] = from;
    return scale;
  }
  if (o.scale == ComputeBenchOptions::Scale::kWindow) {
    reporter.note(fmt::format("bench compute: measuring the reference probe on {} for {} s",
                              executor.name(), o.reference_window_s));
    timer.probe_reference();
    return {{"method", "window"}};
  }
  AnchorOptions a;
  a.batch_size = workload.batch_size;
  a.max_tables = o.max_tables;
  a.mem_cap_bytes = o.mem_cap_bytes;
  a.dims = o.dims;
  a.timer = shard_timer_options(o);
  const std::string model_dir = neural_model_dir(o.model_dir);
  const NeuralModel model = load_neural_model(model_dir);
  // A model of another kind of executor prices the anchors in its units: a
  // GPU's shards against a CPU model's would be refused as drift later.
  const auto kind = [](const std::string& name) { return name.substr(0, name.find(' ')); };
  const json& data = model.info.value("data", json::object());
  const json& files = data.is_object() ? data.value("compute", json::array()) : json::array();
  if (files.is_array() && !files.empty() && files[0].value("executor", json()).is_string()) {
    const std::string model_executor = files[0]["executor"].get<std::string>();
    ES_CHECK(kind(model_executor) == kind(executor.name()),
             "bench compute: --scale anchors prices anchor shards with {}, measured on {}, but "
             "this run measures on {}: pass --model with a model measured on {} (e.g. one "
             "`embshard fit` made there), or --scale window",
             model_dir, model_executor, executor.name(), kind(executor.name()));
  }
  const AnchorScale scale = measure_anchor_scale(timer, model, model_dir, a, reporter);
  timer.set_probe_reference(anchor_probe_reference(scale));
  return anchor_scale_json(scale, a);
}

}  // namespace

int64_t run_compute_bench(const ComputeBenchOptions& options, Reporter& reporter) {
  check_writable(options.out_path, "--out");  // before the reference window, not after
  check_not_being_written(options.out_path);
  const Workload workload = load_workload(options.workload_dir);
  check_options(workload, options);
  const std::unique_ptr<Executor> executor = create_executor(options);
  ShardTimer timer(workload, *executor, shard_timer_options(options));
  const json scale = set_file_scale(workload, options, *executor, timer, reporter);
  ProbeReferenceOptions reference_options = timer.options().reference;
  const json reference = probe_reference_json(timer.probe_reference(), reference_options);
  RecordFile out(
      options.out_path, compute_bench_header(workload, options, *executor, reference, scale),
      {"format", "version", "machine", "workload", "batch_size", "executor", "threads", "seed",
       "dims", "max_tables", "mem_cap_bytes", "warmup", "min_rounds", "max_rounds",
       "target_relative_half_width", "optimizer", "pooling", "piece_share"});
  if (out.dropped_bytes() > 0) {
    reporter.note(fmt::format("bench compute: dropped a torn last record ({} bytes) from {}",
                              out.dropped_bytes(), options.out_path));
  }
  out.check_numbered();
  int64_t next = static_cast<int64_t>(out.records().size());
  if (next >= options.samples) return next;

  Progress progress(reporter, "bench compute", static_cast<uint64_t>(options.samples),
                    static_cast<uint64_t>(next));
  for (; next < options.samples; ++next) {
    const std::vector<ShardTable> shard = draw_shard(workload, options, next);
    ShardMeasurement m;
    try {
      m = timer.measure(shard, fmt::format("{}: sample {}", options.out_path, next));
    } catch (const Error& e) {
      // The executor numbers the shard's tables from 0: name them.
      std::vector<std::string> names;
      for (const ShardTable& t : shard) names.push_back(workload.tables[t.table].name);
      ES_THROW("bench compute: {}: sample {} (tables 0.. of the shard: {}): {}",
               options.workload_dir, next, fmt::join(names, ", "), e.what());
    }
    json tables = json::array();
    for (const ShardTable& t : shard) tables.push_back(table_record(timer, t));
    json record = interleaved_summary_json(m.interleaved);
    record["sample"] = next;
    record["tables"] = tables;
    record["fwd_ms"] = m.normalized.fwd_ms;
    record["bwd_ms"] = m.normalized.bwd_ms;
    record["ms"] = m.normalized.total_ms;
    record["raw_fwd_ms"] = m.raw.fwd_ms;
    record["raw_bwd_ms"] = m.raw.bwd_ms;
    if (options.keep_rounds) record["per_round"] = interleaved_rounds_json(m.interleaved);
    out.append(record);
    progress.update(static_cast<uint64_t>(next + 1),
                    fmt::format("last {} tables {:.2f} ms (raw {:.2f}, {} rounds)", shard.size(),
                                m.normalized.total_ms, m.raw.total_ms, m.interleaved.rounds));
  }
  progress.finish();
  return next;
}

// The last `show` records of a cost file as a table.
std::string compute_records_table(const std::string& path, int64_t show) {
  nlohmann::json header;
  const auto records = RecordFile::read_all(path, &header, nullptr);
  TextTable table({"sample", "tables", "dims", "rows", "pooling", "weights MB", "fwd ms",
                   "bwd+upd ms", "total ms", "raw ms", "rounds", "ratio MAD %"});
  const size_t first = records.size() > static_cast<size_t>(show) ? records.size() - show : 0;
  for (size_t i = first; i < records.size(); ++i) {
    // By pointer: a field missing or of another type in an edited file is
    // named, not read past the end.
    const json& r = records[i];
    const std::string where = fmt::format("{}: record {}", path, i + 1);
    const auto count = [&](const std::string& pointer) {
      return json_field(r, pointer, JsonKind::kCount, where).get<int64_t>();
    };
    const auto number = [&](const std::string& pointer) {
      return json_field(r, pointer, JsonKind::kNumber, where).get<double>();
    };
    std::string dims;
    int64_t rows = 0;
    double pooling = 0, bytes = 0;
    const size_t tables = json_field(r, "/tables", JsonKind::kArray, where).size();
    for (size_t k = 0; k < tables; ++k) {
      const std::string t = fmt::format("/tables/{}/", k);
      const int64_t dim = count(t + "dim"), table_rows = count(t + "rows");
      dims += fmt::format("{}{}", dims.empty() ? "" : ",", dim);
      rows += table_rows;
      pooling += number(t + "pooling_factor");
      bytes += static_cast<double>(table_rows) * static_cast<double>(dim) * 4;
    }
    if (dims.size() > 28) dims = dims.substr(0, 25) + "...";
    const double ms = number("/ms");
    const json* raw = json_optional(r, "/raw_ms", JsonKind::kNumber, where);
    const json* rounds = json_optional(r, "/rounds", JsonKind::kCount, where);
    const json* mad = json_optional(r, "/ratio_mad", JsonKind::kNumber, where);
    table.add_row({std::to_string(count("/sample")), std::to_string(tables), dims,
                   std::to_string(rows), fmt::format("{:.1f}", pooling),
                   fmt::format("{:.1f}", bytes / 1e6), fmt::format("{:.3f}", number("/fwd_ms")),
                   fmt::format("{:.3f}", number("/bwd_ms")), fmt::format("{:.3f}", ms),
                   fmt::format("{:.3f}", raw ? raw->get<double>() : ms),
                   rounds ? rounds->dump() : "-",
                   mad ? fmt::format("{:.1f}", 100 * mad->get<double>()) : "-"});
  }
  const json* reference =
      json_optional(header, "/probe/reference/reference_ms", JsonKind::kNumber, path);
  const double reference_ms = reference ? reference->get<double>() : 0.0;
  const json* executor = json_optional(header, "/executor", JsonKind::kString, path);
  const json* batch = json_optional(header, "/batch_size", JsonKind::kCount, path);
  const json* method = json_optional(header, "/scale/method", JsonKind::kString, path);
  const json* model = json_optional(header, "/scale/model", JsonKind::kString, path);
  std::string scale = "raw medians: version 1, not normalized";
  if (reference_ms > 0 && method && *method == "anchors") {
    scale = fmt::format(
        "normalized against the reference probe, worth {:.3f} ms by anchors "
        "priced by {}",
        reference_ms, model ? model->get<std::string>() : "?");
  } else if (reference_ms > 0) {
    scale = fmt::format("normalized against the reference probe, {:.3f} ms quiet", reference_ms);
  }
  return fmt::format(
      "{} shard costs in {} (batch {}, {}; {}){}\n{}", records.size(), path,
      batch ? batch->get<int64_t>() : 0, executor ? executor->get<std::string>() : "cpu", scale,
      first > 0 ? fmt::format("; the last {}:", records.size() - first) : ":", table.render());
}

}  // namespace embshard
