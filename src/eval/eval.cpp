// `embshard eval`: every algorithm's plan of every task, executed.
#include "embshard/eval/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/cost/anchors.h"
#include "embshard/cost/cost_model.h"
#include "embshard/cost/measured_model.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/neural/model.h"
#include "embshard/cost/neural/model_file.h"
#include "embshard/measure/shard_timer.h"
#include "embshard/plan/predict.h"
#include "embshard/plan/report.h"
#include "embshard/search/planning.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/json_field.h"
#include "embshard/util/machine.h"
#include "embshard/util/reporter.h"
#include "embshard/util/record_file.h"
#include "embshard/util/statistics.h"
#include "embshard/util/units.h"
#include "embshard/workload/trace_shard.h"

namespace embshard {
namespace {

using nlohmann::json;

PlanTask make_eval_task(const Workload& pool, const EvalTask& t, const EvalOptions& o,
                        std::shared_ptr<PieceStats> piece_stats) {
  std::vector<TableSpec> tables;
  for (size_t k = 0; k < t.tables.size(); ++k) {
    TableSpec spec = pool.tables[t.tables[k]];
    spec.dim = t.dims[k];
    tables.push_back(std::move(spec));
  }
  // Feasible under any allowed type: each algorithm's own types are checked
  // when it plans.
  PlanTask task = make_task(std::move(tables), pool.batch_size,
                            device_capacities(o.devices, t.mem_cap_bytes, {}), {});
  task.topology = o.topology;
  task.source_table = t.tables;
  task.piece_stats = std::move(piece_stats);
  return task;
}

// Each device's compute on `costs`' model, nothing else.
std::vector<double> device_compute_ms(const Plan& plan, int devices, ShardCosts& costs) {
  std::vector<std::vector<int>> ids(devices);
  for (const Shard& s : plan.shards) ids[s.device].push_back(costs.shard_id(s));
  std::vector<double> ms(devices, 0.0);
  for (int d = 0; d < devices; ++d) {
    if (!ids[d].empty()) ms[d] = costs.compute().compute_ms(ids[d]);
  }
  return ms;
}

// A +verify algorithm's verification: its budget, with the run's passes.
VerifyOptions verify_options(const AlgoSpec& algo, const EvalOptions& o) {
  VerifyOptions v = algo.verify;
  v.comm_passes = o.measure.comm_passes;
  v.pass_pause_s = o.measure.comm_pass_pause_s;
  v.fresh_passes = o.measure.comm_passes - 1;
  return v;
}

std::string trace_path(const std::string& dir, size_t task, const std::string& algo) {
  return (std::filesystem::path(dir) / fmt::format("task{}_{}.json", task, algo)).string();
}

// A measured plan, kept for the further passes.
struct Measured {
  std::string spec;
  PlanTask task;
  Plan plan;
  PlanPrediction iteration;  // the first pass's; with compute passes, each device's median
  std::vector<std::vector<double>> compute_passes;  // by pass, then device
};

// An --algos item's plan of the task: its planner's, or with verification
// its planner's best plans measured on `selection`. Error where it finds none.
PlanResult plan_algo(const AlgoSpec& algo, const PlanTask& task, const EvalOptions& o,
                     const CostModel& model, const CostModel* selection) {
  if (algo.flat) {
    AlgoSpec one_host = algo;
    one_host.flat = false;
    PlanTask flat = task;
    flat.topology = Topology{};
    PlanResult r = plan_algo(one_host, flat, o, model, selection);
    ShardCosts costs(task, model);  // the plan on the hosts it runs on
    r.predicted = predict_plan(task, r.plan, costs);
    r.bound = lower_bound(task, costs);
    return r;
  }
  const std::string base = verified_base(algo.name);
  if (base.empty()) return plan_task(task, algo.name, algo.planner, model);
  auto planner = create_planner(base, algo.planner);
  PlanResult r = make_verified_plan(*planner, task, model, *selection, verify_options(algo, o));
  r.algorithm = algo.name;
  return r;
}

// What a verified algorithm's record says of its verification.
json verification_record(const Verification& v) {
  const VerifiedCandidate& chosen = v.candidates[v.chosen];
  json j = {{"measured_plans", v.candidates.size()},
            {"chosen_round", chosen.round},
            {"chosen_source", chosen.source},
            {"verify_s", v.verify_s}};
  if (!v.tables.empty()) {
    j["tables_measured"] = v.tables.size();
    j["tables_s"] = v.tables_s;
  }
  if (chosen.passes_ms.size() > 1) j["chosen_passes_ms"] = chosen.passes_ms;
  if (!chosen.fresh_ms.empty()) j["chosen_fresh_ms"] = chosen.fresh_ms;
  if (const std::optional<RunnerUp> next = runner_up(v)) j["runner_up"] = runner_up_json(*next);
  // The search's own first pick beside it: how far the choice's figure in
  // verification is from the pick's, on the same measurements, and so how
  // much the chosen plan's later measurement falls back by chance.
  const VerifiedCandidate& first = v.candidates.front();
  j["first_predicted_ms"] = first.predicted.cost_ms;
  j["first_passes_ms"] = first.passes_ms;
  if (!first.fresh_ms.empty()) j["first_fresh_ms"] = first.fresh_ms;
  return j;
}

// A plan's record before anything is measured: its sharding types, the
// model's figures, the search's.
json plan_record(const PlanTask& task, const PlanResult& r) {
  json types_used = json::object();
  for (int t = 0; t < task.num_tables(); ++t) {
    const std::string type = sharding_type(task, r.plan, t);
    types_used[type] = types_used.value(type, 0) + 1;
  }
  json record = {{"sharding_types", types_used},
                 {"predicted_ms", r.predicted.cost_ms},
                 {"bound_ms", r.bound.total_ms()},
                 {"search_s", r.search_s},
                 {"shards", r.plan.shards.size()}};
  if (!r.search_summary.empty()) record["search"] = r.search_summary;  // neuroshard's beams
  if (r.verification) record["verification"] = verification_record(*r.verification);
  return record;
}

// The measured iteration into the record: its cost, and where the model
// erred device by device (compute predicted and measured; the communication
// is measured for the plan as a whole).
void record_measurement(json& record, const PlanResult& r, const PlanPrediction& iteration,
                        const PlanTask& task, ShardCosts* raw_costs, const EvalOptions& o) {
  record["measured_ms"] = iteration.cost_ms;
  json& devices =
      record["device_compute_ms"] = {{"predicted", json::array()}, {"measured", json::array()}};
  for (size_t d = 0; d < iteration.devices.size(); ++d) {
    devices["predicted"].push_back(r.predicted.devices[d].compute_ms);
    devices["measured"].push_back(iteration.devices[d].compute_ms);
  }
  if (raw_costs) record["measured_raw_ms"] = predict_plan(task, r.plan, *raw_costs).cost_ms;
  if (o.measure.comm_passes > 1) {
    record["measured_passes_ms"] = {iteration.cost_ms};
    if (raw_costs) record["measured_raw_passes_ms"] = {record["measured_raw_ms"]};
  }
}

// Every device's compute measured again, pass by pass over the plans; each
// counts at its median, and the figure on the first pass alone stays beside.
// Each pass starts at the next plan, so that none is always measured first.
void measure_compute_passes(std::vector<Measured>& measured, json& algos, ShardCosts& costs,
                            int devices, const EvalOptions& o) {
  for (int pass = 1; pass < o.measure.compute_passes; ++pass) {
    costs.compute().set_fresh_pass(true);
    for (size_t k = 0; k < measured.size(); ++k) {
      Measured& m = measured[(pass + k) % measured.size()];
      m.compute_passes.push_back(device_compute_ms(m.plan, devices, costs));
    }
    costs.compute().set_fresh_pass(false);
  }
  for (Measured& m : measured) {
    json& record = algos[m.spec];
    json& device_ms = record["device_compute_ms"];
    device_ms["measured_passes"] = m.compute_passes;
    for (size_t d = 0; d < m.iteration.devices.size(); ++d) {
      std::vector<double> ms;
      for (const std::vector<double>& pass : m.compute_passes) ms.push_back(pass[d]);
      m.iteration.devices[d].compute_ms = median(ms);
      device_ms["measured"][d] = m.iteration.devices[d].compute_ms;
    }
    finish_prediction(costs.comm(), m.iteration);  // its all-to-alls again
    record["measured_first_compute_ms"] = record["measured_ms"];
    record["measured_ms"] = m.iteration.cost_ms;
    if (o.measure.comm_passes > 1) {
      record["measured_first_compute_passes_ms"] = record["measured_passes_ms"];
      record["measured_passes_ms"] = {m.iteration.cost_ms};
    }
  }
}

// The plans' further passes, seconds apart: compute is cached, so each pass
// measures the all-to-alls again (with compute passes, twice: beside the
// medians, the first compute pass's figure on its own exchanges).
void measure_comm_passes(std::vector<Measured>& measured, json& algos, ShardCosts& costs,
                         ShardCosts* raw_costs, bool medians, const EvalOptions& o) {
  // A pass's figure joins `passes`; `figure` becomes their fastest half's mean.
  const auto add_pass = [](json& record, const char* figure, const char* passes, double ms) {
    record[passes].push_back(ms);
    record[figure] = fastest_half_mean(record[passes].get<std::vector<double>>());
  };
  for (int pass = 1; pass < o.measure.comm_passes && !measured.empty(); ++pass) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.measure.comm_pass_pause_s));
    for (Measured& m : measured) {
      json& record = algos[m.spec];
      const double first = predict_plan(m.task, m.plan, costs).cost_ms;
      if (medians) {
        add_pass(record, "measured_first_compute_ms", "measured_first_compute_passes_ms", first);
        finish_prediction(costs.comm(), m.iteration);
      }
      add_pass(record, "measured_ms", "measured_passes_ms", medians ? m.iteration.cost_ms : first);
      if (raw_costs) {
        add_pass(record, "measured_raw_ms", "measured_raw_passes_ms",
                 predict_plan(m.task, m.plan, *raw_costs).cost_ms);
      }
    }
  }
}

// `truth`: compute measured on the executor, communication measured or
// modelled (null: predict only); `selection`: the same measurements with
// their own cache, for the verified algorithms' choice (so that the chosen
// plan's reported cost is a measurement of its own, not the minimum of those
// it was chosen by); `raw_truth`: truth on the raw clock (null: not asked).
json eval_one(const PlanTask& all_types, size_t index, const EvalOptions& o,
              const CostModel& model, const CostModel* truth, const CostModel* selection,
              const CostModel* raw_truth) {
  std::optional<ShardCosts> measured_costs, raw_costs;
  if (truth != nullptr) measured_costs.emplace(all_types, *truth);
  if (raw_truth != nullptr) raw_costs.emplace(all_types, *raw_truth);
  ShardCosts* raw = raw_costs ? &*raw_costs : nullptr;
  json algos = json::object();
  std::vector<Measured> measured;  // for the further passes
  for (const std::string& spec : o.algos) {
    const AlgoSpec algo = parse_algo_spec(spec, o);
    PlanTask task = all_types;
    task.types = algo.types;
    PlanResult r;
    try {
      r = plan_algo(algo, task, o, model, selection);
    } catch (const Error& e) {
      // A heuristic can fail to pack a feasible task; that is a result too.
      algos[spec] = {{"error", e.what()}};
      continue;
    }
    json& record = algos[spec] = plan_record(task, r);
    const PlanPrediction iteration =
        measured_costs ? predict_plan(task, r.plan, *measured_costs) : r.predicted;
    if (measured_costs) {
      record_measurement(record, r, iteration, task, raw, o);
      if (o.measure.comm_passes > 1 || o.measure.compute_passes > 1) {
        std::vector<double> first;
        for (const DeviceCosts& d : iteration.devices) first.push_back(d.compute_ms);
        measured.push_back({spec, task, r.plan, iteration, {first}});
      }
    }
    if (!o.trace_dir.empty()) {
      const std::string label = fmt::format("task {}, {}: {}", index, spec,
                                            truth != nullptr ? truth->name : model.name);
      write_file_atomic(trace_path(o.trace_dir, index, spec),
                        iteration_trace(task, r.plan, iteration, label,
                                        measured_costs ? &r.predicted : nullptr,
                                        "predicted: " + model.name)
                                .dump(1) +
                            "\n");
    }
  }
  const bool medians = o.measure.compute_passes > 1 && !measured.empty();
  if (medians) {
    measure_compute_passes(measured, algos, *measured_costs, all_types.num_devices(), o);
  }
  if (!measured.empty()) measure_comm_passes(measured, algos, *measured_costs, raw, medians, o);
  return algos;
}

void prepare_trace_dir(const EvalOptions& o) {
  std::error_code error;
  std::filesystem::create_directories(o.trace_dir, error);
  ES_CHECK(!error, "--trace-dir {}: cannot create the directory: {}", o.trace_dir, error.message());
  check_writable(trace_path(o.trace_dir, 0, o.algos.front()), "--trace-dir");
}

// The record file's header: what the run is, so that a resumed run must be
// the same run.
json eval_header(const EvalOptions& o, const std::string& pool_dir, const Workload& pool,
                 const std::string& comm_source) {
  return json{{"format", "embshard-eval"},
              {"version", 2},  // 2: compute measured against the reference probe
              {"embshard_version", EMBSHARD_VERSION},
              {"machine", machine_info()},
              {"tasks", std::filesystem::absolute(o.tasks_path).lexically_normal().string()},
              {"pool", pool_dir},
              {"batch_size", pool.batch_size},
              {"devices", o.devices},
              {"algos", o.algos},
              {"sharding_types", o.types.str()},
              {"cost_model", o.cost_model},
              {"model_dir", o.model_dir},
              {"threads", o.measure.threads},
              {"comm", comm_source}};
}

// The measuring models of a run that measures: `truth` (compute on the
// executor on the run's scale, communication `comm` or the model's),
// `selection` for the verified algorithms' choice, `raw_truth` on the raw
// clock; the header says how they measure.
struct MeasuringModels {
  std::optional<CostModel> truth, selection, raw_truth;
};

// The header's measurement fields: the executor, the probe and its source,
// the passes and the verification budget (each absent at its default).
void add_measurement_header(json& header, const EvalOptions& o, bool verified,
                            const MeasuredComputeModel& measured,
                            const std::string& reference_source, const json& comm_probe) {
  ProbeReferenceOptions reference_options;
  reference_options.min_window_ms = 1e3 * o.measure.reference_window_s;
  header["executor"] = measured.executor_name();
  header["probe"] = reference_probe_json();
  header["probe_reference"] = probe_reference_json(measured.probe_reference(), reference_options);
  header["reference_source"] = reference_source;
  header["comm_probe"] = comm_probe;
  if (o.measure.comm_passes > 1) header["comm_passes"] = o.measure.comm_passes;
  if (o.measure.compute_passes > 1) header["compute_passes"] = o.measure.compute_passes;
  if (!verified) return;
  header["verify_candidates"] = o.verify.candidates;
  if (o.verify.rounds > 1) header["verify_rounds"] = o.verify.rounds;
  // Rival plans measured beside the search's (absent: none).
  if (!o.verify.rivals.empty()) header["verify_rivals"] = o.verify.rivals;
  // Chosen on every pass (absent: on one, or by an older build).
  if (o.measure.comm_passes > 1) header["verify_passes"] = o.measure.comm_passes;
  // Leaders measured afresh (absent: none).
  if (o.measure.comm_passes > 1 && o.verify.leaders > 0) {
    header["verify_leaders"] = o.verify.leaders;
  }
  if (o.verify.measure_tables) header["verify_tables"] = true;  // absent: only where --algos says
}

// Whether the cost model learned raw medians (a GPU set's: train --raw):
// its plans are then judged on the raw clock, as validate judges it.
bool learned_raw_medians(const EvalOptions& o) {
  if (o.cost_model != "neural") return false;
  const NeuralModel model = load_neural_model(neural_model_dir(o.model_dir));
  const json* truth = json_optional(model.info, "/data/ground_truth", JsonKind::kString,
                                    neural_model_dir(o.model_dir));
  return truth != nullptr && *truth == ground_truth_label(false);
}

MeasuringModels measuring_models(const EvalOptions& o, CostModelOptions mo, const CostModel& model,
                                 const Workload& pool, bool verified,
                                 std::shared_ptr<const CommModel> comm,
                                 const std::string& comm_source, const json& comm_probe,
                                 std::shared_ptr<const CommModel> raw_comm, json& header,
                                 Reporter& reporter) {
  MeasuringModels out;
  mo.reference_window_s = o.measure.reference_window_s;
  const auto measured = make_measured_compute_model(mo);
  // The scale: a resumed run keeps its file's (the probe reference in its
  // header), a new one takes the cost model's or measures it now.
  std::string reference_source = "measured in this run";
  json previous;
  if (has_records(o.out_path)) RecordFile::read_all(o.out_path, &previous, nullptr);
  if (previous.contains("probe_reference")) {
    measured->set_probe_reference(
        probe_reference_from_json(previous, "/probe_reference", o.out_path));
    const json* source =
        json_optional(previous, "/reference_source", JsonKind::kString, o.out_path);
    reference_source = source ? source->get<std::string>() : "the resumed file's";
    if (previous.contains("scale")) header["scale"] = previous["scale"];
  } else if (o.measure.reference == EvalMeasurement::Reference::kAnchors) {
    AnchorOptions a;
    a.batch_size = pool.batch_size;
    const std::string model_dir = neural_model_dir(o.model_dir);
    const AnchorScale scale = measure_anchor_scale(measured->timer(), load_neural_model(model_dir),
                                                   model_dir, a, reporter);
    measured->set_probe_reference(anchor_probe_reference(scale));
    reference_source = "anchors priced by " + model_dir;
    header["scale"] = anchor_scale_json(scale, a);
  } else if (o.measure.reference == EvalMeasurement::Reference::kModel) {
    const ReferenceScale scale = model_reference_scale(
        o.cost_model, o.model_dir, measured->executor_name(), o.devices, pool.batch_size);
    if (scale.compute) {
      measured->set_probe_reference(*scale.compute);
      reference_source = "the cost model's (" + scale.source + ")";
    } else {
      reporter.note(fmt::format("eval: measuring the reference probe now: {}", scale.note));
    }
  }
  const bool raw = learned_raw_medians(o);
  if (raw) header["ground_truth"] = ground_truth_label(false);
  const auto truth = [&](std::shared_ptr<MeasuredComputeModel> m) -> std::shared_ptr<ComputeModel> {
    if (raw) return raw_clock_view(std::move(m));
    return m;
  };
  out.truth = CostModel{
      truth(measured), comm ? comm : model.comm,
      fmt::format("measured compute{}; comm: {}", raw ? " (raw medians)" : "", comm_source),
      ModelSource{}};
  if (o.measure.raw_clock) {
    ES_CHECK(raw_comm != nullptr, "eval: --raw-clock without the raw clock's communication");
    out.raw_truth = CostModel{raw_clock_view(measured), raw_comm,
                              "measured compute and comm on the raw clock", ModelSource{}};
    header["raw_clock"] = true;
  }
  if (verified) {
    const auto chooser = make_measured_compute_model(mo);
    chooser->set_probe_reference(measured->probe_reference());
    out.selection =
        CostModel{truth(chooser), out.truth->comm,
                  "measured compute (for the choice); comm: " + comm_source, ModelSource{}};
  }
  add_measurement_header(header, o, verified, *measured, reference_source, comm_probe);
  if (o.cost_model == "neural") {
    const NeuralModel priced = load_neural_model(neural_model_dir(o.model_dir));
    const auto check = check_file_scale(header, o.out_path, measured_compute_files(priced));
    if (check) reporter.note("eval: " + check->text);
  }
  return out;
}

// A resumed file's records: at most one per task, each task's in order.
void check_resumed_records(const RecordFile& out, const std::vector<EvalTask>& tasks,
                           const EvalOptions& o) {
  const size_t done = out.records().size();
  ES_CHECK(done <= tasks.size(),
           "{}: holds {} records but {} has {} tasks: not this task file's run", o.out_path, done,
           o.tasks_path, tasks.size());
  for (size_t k = 0; k < done; ++k) {
    const json& r = out.records()[k];
    ES_CHECK(r.is_object() && r.contains("task") && r["task"] == k,
             "{}: record {} is {}, expected task {}'s (each task once, in order)", o.out_path,
             k + 1, json_shown(r, 60), k);
  }
}

}  // namespace

std::vector<json> run_eval(const EvalOptions& o, Reporter& reporter,
                           std::shared_ptr<const CommModel> comm, const std::string& comm_source,
                           const json& comm_probe, std::shared_ptr<const CommModel> raw_comm) {
  const bool verified = check_eval_options(o, comm != nullptr);
  check_not_being_written(o.out_path);  // before the reference window, not after
  if (!o.trace_dir.empty()) prepare_trace_dir(o);
  std::string pool_dir;
  const std::vector<EvalTask> tasks = load_tasks(o.tasks_path, &pool_dir);
  const Workload pool = load_workload(pool_dir);
  const auto piece_stats = std::make_shared<PieceStats>(pool.trace_path());
  // Every table the tasks use, read once now: a corrupt trace or an index
  // outside its table is an error, not a task left out as if it did not fit.
  std::set<int> used;
  for (const EvalTask& t : tasks) used.insert(t.tables.begin(), t.tables.end());
  for (int t : used) piece_stats->piece(t, pool.tables[t], 0, pool.tables[t].rows);
  CostModelOptions mo;
  mo.model_dir = o.model_dir;
  mo.workload_dir = pool_dir;
  mo.batch_size = pool.batch_size;
  mo.executor = o.measure.executor;
  mo.threads = o.measure.threads;
  mo.thread_cpu_time = o.measure.thread_cpu_time;
  const CostModel model = create_cost_model(o.cost_model, mo);
  json header = eval_header(o, pool_dir, pool, comm_source);
  // Predict only: no executor, no probe; the header says so, and a run that
  // measures cannot resume the file (nor the other way round).
  MeasuringModels m;
  if (o.predict_only) {
    header["predict_only"] = true;
  } else {
    m = measuring_models(o, mo, model, pool, verified, comm, comm_source, comm_probe, raw_comm,
                         header, reporter);
  }
  if (o.topology.hierarchical(o.devices)) header["topology"] = o.topology.str(o.devices);
  // The task file's content, not only its path: a task file made again at the
  // same path must not resume on the old one's records.
  header["tasks_crc32"] = fmt::format("{:08x}", file_crc32(o.tasks_path));
  RecordFile out(
      o.out_path, header,
      {"format",        "version",       "machine",        "tasks",          "tasks_crc32",
       "pool",          "devices",       "topology",       "algos",          "sharding_types",
       "cost_model",    "model_dir",     "threads",        "comm",           "predict_only",
       "executor",      "comm_passes",   "compute_passes", "raw_clock",      "verify_candidates",
       "verify_rounds", "verify_passes", "verify_rivals",  "verify_leaders", "verify_tables"});
  if (out.dropped_bytes() > 0) {
    reporter.note(fmt::format("eval: dropped a torn last record ({} bytes) from {}",
                              out.dropped_bytes(), o.out_path));
  }
  check_resumed_records(out, tasks, o);
  const size_t done = out.records().size();
  Progress progress(reporter, "eval", tasks.size(), done);
  for (size_t i = done; i < tasks.size(); ++i) {
    PlanTask task;
    try {
      task = make_eval_task(pool, tasks[i], o, piece_stats);
    } catch (const Error& e) {
      // The same task file serves any device count: a task too big for this
      // many devices is recorded and left out of the summary, not fatal.
      out.append({{"task", i}, {"infeasible", e.what()}});
      progress.update(i + 1, fmt::format("task {} does not fit {} devices", i, o.devices));
      continue;
    }
    out.append({{"task", i},
                {"tables", task.num_tables()},
                {"algos", eval_one(task, i, o, model, m.truth ? &*m.truth : nullptr,
                                   m.selection ? &*m.selection : nullptr,
                                   m.raw_truth ? &*m.raw_truth : nullptr)}});
    progress.update(i + 1);
  }
  progress.finish();
  return out.records();
}

}  // namespace embshard
