// The planner registry, the lower bound, and make_plan (validate + predict).
#include "embshard/search/planner.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/ranges.h>

#include "embshard/cost/corrected_model.h"
#include "embshard/cost/topology.h"
#include "embshard/search/policy.h"
#include "embshard/util/error.h"
#include "embshard/util/statistics.h"
#include "embshard/util/units.h"
#include "search/planners.h"

namespace embshard {

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names = {
      "random",     "size_greedy", "dim_greedy", "lookup_greedy", "size_lookup_greedy",
      "torchrec",   "neuroshard", "dreamshard", "autoshard"};
  return names;
}

namespace {

// Other projects' planners run through their own code (torchrec_planner):
// create_planner makes them; they run where that code is installed.
const std::vector<std::string>& peer_planner_names() {
  static const std::vector<std::string> names = {"torchrec_planner"};
  return names;
}

}  // namespace

std::unique_ptr<Planner> create_planner(const std::string& name, const PlannerOptions& options) {
  if (name == "random") return make_random_planner(options);
  if (name == "size_greedy" || name == "dim_greedy" || name == "lookup_greedy" ||
      name == "size_lookup_greedy") {
    return make_score_greedy_planner(name);
  }
  if (name == "torchrec") return make_torchrec_planner(options);
  if (name == "torchrec_planner") return make_torchrec_peer_planner();
  if (name == "neuroshard") return make_neuroshard_planner(options);
  if (name == "dreamshard") return make_policy_planner(PolicyKind::kDreamShard, options);
  if (name == "autoshard") return make_policy_planner(PolicyKind::kAutoShard, options);
  ES_THROW("unknown planner '{}'; valid planners: {}, {}", name, fmt::join(planner_names(), ", "),
           fmt::join(peer_planner_names(), ", "));
}

void check_policy_use(const std::string& name, const PlannerOptions& options) {
  const auto& learned = policy_kind_names();
  ES_CHECK(options.policy_dir.empty() || std::ranges::find(learned, name) != learned.end(),
           "--policy {}: --algo {} plans without a policy ({} use one)", options.policy_dir,
           name, fmt::join(learned, " and "));
}

namespace {

// A piece alone on a device: its compute and the least communication that
// device then has.
struct PieceFloor {
  double piece_ms = 0, comm_ms = 0;
  double total() const { return piece_ms + comm_ms; }
};

// The communication of the device holding a row piece or a replica and
// nothing else: the all-to-all at no load (`a2a_ms`) plus its collectives
// alone (at 1,024 devices a reduce-scatter's latency alone can exceed what
// the split saves).
double collective_floor_ms(const PlanTask& task, const CommModel& comm, double a2a_ms, int cols,
                           double index_bytes, double allreduce_bytes) {
  const size_t n = task.num_devices();
  CollectiveLoad load;
  load.reset(n);
  if (cols > 0) load.add_row_shard(0, cols, index_bytes);
  load.allreduce_bytes = allreduce_bytes;
  std::vector<double> fwd(n, 0.0), bwd(n, 0.0);
  comm.collective_ms(load, fwd, bwd);
  return a2a_ms + fwd[0] + bwd[0];
}

// The cheapest piece any allowed form of table t has, with its device's
// least communication: its cheapest column piece (`narrow`), the cheapest
// block of its finest row split (at the narrowest width where grids are
// allowed) and its replica. Some device holds one of them. Each form's
// communication is at least `link_ms`, what every device's host link takes.
PieceFloor cheapest_piece(const PlanTask& task, ShardCosts& costs, int t, PieceFloor narrow,
                          double link_ms) {
  const TableSpec& spec = task.tables[t];
  const double a2a_ms = narrow.comm_ms;
  narrow.comm_ms = std::max(narrow.comm_ms, link_ms);
  PieceFloor best = narrow;
  for (int k = task.num_devices(); k >= 2; --k) {
    if (!task.row_splittable(t, k)) continue;
    const int cols =
        task.types.allows(ShardingType::kGridShard) ? task.min_piece_cols(t) : spec.dim;
    const std::vector<int64_t> sizes = row_block_sizes(spec, k);
    const int64_t block = (spec.rows + k - 1) / k;
    for (int b = 0; b < k; ++b) {
      const PieceFloor f{
          costs.single_ms(costs.shard_id(Shard{t, 0, cols, block * b, sizes[b], 0, false})),
          std::max(link_ms, collective_floor_ms(
                                task, costs.comm(), a2a_ms, cols,
                                index_exchange_bytes(spec.pooling_factor, task.batch_size,
                                                     task.lookup_share(t, block * b, sizes[b])),
                                0))};
      if (f.total() < best.total()) best = f;
    }
    break;
  }
  if (task.types.allows(ShardingType::kDataParallel) && task.pinned_device[t] < 0) {
    const PieceFloor f{
        costs.single_ms(costs.shard_id(Shard{t, 0, spec.dim, 0, spec.rows, 0, true})),
        std::max(link_ms, collective_floor_ms(task, costs.comm(), a2a_ms, 0, 0,
                                              static_cast<double>(spec.weight_bytes())))};
    if (f.total() < best.total()) best = f;
  }
  return best;
}

// Whether every plan sends table t through the pooled all-to-all (no row
// split and no replica can take it out).
bool always_alltoall(const PlanTask& task, int t) {
  if (task.types.allows(ShardingType::kDataParallel) && task.pinned_device[t] < 0) return false;
  for (int k = 2; k <= task.num_devices(); ++k) {
    if (task.row_splittable(t, k)) return false;
  }
  return true;
}

}  // namespace

LowerBound lower_bound(const PlanTask& task, ShardCosts& costs) {
  LowerBound b;
  std::vector<int> all;
  for (int t = 0; t < task.num_tables(); ++t) all.push_back(costs.piece_id(t, task.tables[t].dim));
  // The devices together cost at least the whole task fused into one call.
  b.work_ms = costs.compute().compute_ms(all) / task.num_devices();
  const size_t n = task.num_devices();
  std::vector<double> dims(n, 0.0), zero(n, 0.0), fwd(n), bwd(n);
  costs.comm().comm_ms(dims, zero, fwd, bwd);
  b.comm_ms = fwd[0] + bwd[0];
  for (size_t d = 1; d < n; ++d) b.comm_ms = std::min(b.comm_ms, fwd[d] + bwd[d]);
  b.comm_ms = std::max(0.0, b.comm_ms);
  // Only the dims that go through the all-to-all in every plan (row pieces
  // and replicas take theirs through other collectives, costed >= 0).
  double total_dims = 0;
  for (int t = 0; t < task.num_tables(); ++t) {
    if (always_alltoall(task, t)) total_dims += task.tables[t].dim;
  }
  dims.assign(n, total_dims / n);
  costs.comm().comm_ms(dims, zero, fwd, bwd);
  for (size_t d = 0; d < n; ++d) b.mean_comm_ms += (fwd[d] + bwd[d]) / n;
  // With hosts, what every device's host link takes, whatever the plan.
  std::vector<double> table_dims, replica_bytes;
  for (int t = 0; t < task.num_tables(); ++t) {
    table_dims.push_back(task.tables[t].dim);
    const bool replicable =
        task.types.allows(ShardingType::kDataParallel) && task.pinned_device[t] < 0;
    replica_bytes.push_back(replicable ? static_cast<double>(task.tables[t].weight_bytes()) : -1);
  }
  const double link_ms =
      host_link_floor_ms(costs.comm(), task.num_devices(), table_dims, replica_bytes);
  b.mean_comm_ms = std::max(b.mean_comm_ms, link_ms);
  // Some device holds each table's cheapest piece (or the whole table if it
  // may not be split), and costs at least that piece alone and its least
  // communication. The cheapest is at most its cheapest column piece (over
  // the widths halvings make: a model need not price fewer columns lower): a
  // table whose column pieces cannot raise the bound is not split into its
  // finest row blocks to find it (10,000 tables x 1,024 devices: ten million
  // blocks).
  const double a2a_ms = b.comm_ms;
  std::vector<std::pair<double, int>> narrow;
  for (int t = 0; t < task.num_tables(); ++t) {
    int cols = task.tables[t].dim;
    double least = costs.single_ms(costs.piece_id(t, cols));
    while (cols > task.min_piece_cols(t)) {
      cols /= 2;
      least = std::min(least, costs.single_ms(costs.piece_id(t, cols)));
    }
    narrow.emplace_back(least, t);
  }
  std::sort(narrow.begin(), narrow.end(), std::greater<>());
  PieceFloor top;
  for (const auto& [narrow_ms, t] : narrow) {
    if (top.piece_ms > 0 && narrow_ms + std::max(a2a_ms, link_ms) <=
                                std::max(top.total(), b.work_ms + b.mean_comm_ms)) {
      break;
    }
    const PieceFloor f = cheapest_piece(task, costs, t, {narrow_ms, a2a_ms}, link_ms);
    if (f.total() > top.total() || top.piece_ms == 0) top = f;
  }
  b.piece_ms = top.piece_ms;
  b.comm_ms = top.comm_ms;
  return b;
}

namespace {

// One candidate's devices as measured sets: each piece's source table and
// predicted cost alone (under `costs`, the base model), the device's
// measured and predicted compute.
void add_measured_sets(const PlanTask& task, const VerifiedCandidate& c, ShardCosts& costs,
                       std::vector<MeasuredSet>& sets) {
  std::vector<MeasuredSet> devices(task.num_devices());
  for (const Shard& s : c.plan.shards) {
    MeasuredSet& d = devices[s.device];
    d.tables.push_back(static_cast<size_t>(s.table) < task.source_table.size()
                           ? task.source_table[s.table]
                           : s.table);
    d.single_ms.push_back(costs.single_ms(costs.shard_id(s)));
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].tables.empty()) continue;
    devices[d].measured_ms = c.measured.devices[d].compute_ms;
    devices[d].predicted_ms = c.predicted.devices[d].compute_ms;
    sets.push_back(std::move(devices[d]));
  }
}

// Plans compare equal when their devices hold the same shards, in any order
// and under any device labels: both are valid plans (caps, pins and
// TorchRec's row-block ranks checked), and the devices run alike. (Ranks on
// several hosts are not alike in their links; the measured comm then sees
// one labelling of the two.)
using PieceKey = std::tuple<int, int, int, int64_t, int64_t, bool>;
using PlanKey = std::vector<std::vector<PieceKey>>;
PlanKey plan_key(const Plan& p, int devices) {
  PlanKey key(devices);
  for (const Shard& s : p.shards) {
    key.at(s.device).emplace_back(s.table, s.col_offset, s.cols, s.row_offset, s.rows, s.replica);
  }
  for (auto& device : key) std::sort(device.begin(), device.end());
  std::sort(key.begin(), key.end());
  return key;
}

// The task's tables far from those `compute` was fitted on, the first three
// named: "2 tables far from those the compute model was fitted on: 'hot_3'
// (pooling factor 2400: ...), 'big' (...)"; empty: none. (No semicolons:
// the report joins the extrapolations with them.)
std::string far_tables(const PlanTask& task, const ComputeModel& compute) {
  std::vector<std::string> far;
  for (const TableSpec& t : task.tables) {
    const std::string why = compute.far_from_training(table_features(t, t.dim));
    if (!why.empty()) far.push_back(fmt::format("'{}' ({})", t.name, why));
  }
  if (far.empty()) return {};
  const size_t named = std::min<size_t>(far.size(), 3);
  return fmt::format("{} far from those the compute model was fitted on: {}{}",
                     count_of(static_cast<int64_t>(far.size()), "table"),
                     fmt::join(far.begin(), far.begin() + named, ", "),
                     far.size() > named ? fmt::format(" and {} more", far.size() - named) : "");
}

// What every plan reports of its making: the planner, the model, and how the
// task leaves what the model was measured on.
PlanResult result_header(const Planner& planner, const PlanTask& task, const CostModel& model) {
  PlanResult r;
  r.algorithm = planner.name();
  r.cost_model = model.name;
  r.model_source = model.source;
  r.extrapolated = extrapolations(model.source, task.batch_size, task.num_devices());
  if (std::string far = far_tables(task, *model.compute); !far.empty()) {
    r.extrapolated.push_back(std::move(far));
  }
  return r;
}

void validate_found(const PlanTask& task, const std::vector<Plan>& found, const std::string& by) {
  for (const Plan& plan : found) {
    try {
      validate_plan(task, plan);
    } catch (const Error& e) {
      ES_THROW("planner {} produced an invalid plan: {}", by, e.what());
    }
  }
}

}  // namespace

PlanResult make_plan(Planner& planner, const PlanTask& task, const CostModel& model) {
  PlanResult r = result_header(planner, task, model);
  ShardCosts costs(task, model);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Plan> plans = {planner.plan(task, costs)};
  r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.search_summary = planner.search_summary();
  validate_found(task, plans, planner.name());
  r.plan = std::move(plans.front());
  r.predicted = predict_plan(task, r.plan, costs);
  r.floor_warnings = floor_warnings(task, r.plan, r.predicted, costs);
  r.bound = lower_bound(task, costs);
  return r;
}

void check_verify_rivals(const std::vector<std::string>& rivals, const std::string& what) {
  const std::vector<std::string>& known = planner_names();
  for (const std::string& name : rivals) {
    ES_CHECK(std::find(known.begin(), known.end(), name) != known.end(),
             "{}: '{}' is no planner (one of: {})", what, name, fmt::join(known, ", "));
  }
}

std::vector<std::string> parse_verify_rivals(const std::string& text, const std::string& what) {
  if (text == "none") return {};
  std::vector<std::string> rivals = split_names(text);
  check_verify_rivals(rivals, what);
  return rivals;
}

namespace {

// Error naming the option for verification settings out of range.
void check_verify_options(const VerifyOptions& o) {
  ES_CHECK(o.candidates >= 0, "verification: {} candidates, need at least 0", o.candidates);
  ES_CHECK(o.rounds >= 1, "verification: {} rounds, need at least 1", o.rounds);
  check_verify_rivals(o.rivals, "verification: rivals");
  ES_CHECK(o.comm_passes >= 1 && o.pass_pause_s >= 0,
           "verification: {} passes {} s apart, need at least 1 and at least 0 s",
           o.comm_passes, o.pass_pause_s);
  ES_CHECK(o.leaders >= 0 && o.fresh_passes >= 0,
           "verification: {} leaders measured {} times more, need at least 0 of each",
           o.leaders, o.fresh_passes);
  ES_CHECK(!o.measure_tables || o.candidates > 0,
           "verification: measuring the tables alone needs at least 1 candidate");
}

// Each table measured alone and whole on `measured` before the first search:
// a set each for the correction, and a line each in the report.
void measure_tables_alone(const PlanTask& task, ShardCosts& costs, ShardCosts& measured,
                          std::vector<MeasuredSet>& sets, Verification& v) {
  const auto tables_start = std::chrono::steady_clock::now();
  for (int t = 0; t < task.num_tables(); ++t) {
    const Shard whole{t, 0, task.tables[t].dim, 0, task.tables[t].rows, 0, false};
    const double predicted = costs.single_ms(costs.shard_id(whole));
    const double measured_ms = measured.single_ms(measured.shard_id(whole));
    sets.push_back({{task.source_table.empty() ? t : task.source_table[t]},
                    {predicted},
                    measured_ms,
                    predicted});
    v.tables.push_back({task.tables[t].name, predicted, measured_ms});
  }
  v.tables_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tables_start)
                   .count();
}

// Further passes over every candidate, seconds apart (compute is cached:
// each pass measures the communication again). A slow stretch of the
// machine's then falls on one pass of a plan rather than on its figure.
void measure_again(const PlanTask& task, ShardCosts& measured, const VerifyOptions& o,
                   Verification& v) {
  v.comm_passes = o.comm_passes;
  for (int pass = 1; pass < o.comm_passes; ++pass) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.pass_pause_s));
    for (VerifiedCandidate& c : v.candidates) {
      PlanPrediction again = predict_plan(task, c.plan, measured);
      c.passes_ms.push_back(again.cost_ms);
      if (again.cost_ms < c.measured.cost_ms) c.measured = std::move(again);
    }
  }
  for (VerifiedCandidate& c : v.candidates) c.measured_ms = fastest_half_mean(c.passes_ms);
}

// The candidate chosen: the lowest figure, or with leaders, the lowest median
// of the leaders' figures and their measurements afresh.
int choose_candidate(const PlanTask& task, ShardCosts& measured, const VerifyOptions& o,
                     Verification& v) {
  const auto lower = [&](size_t a, size_t b) {
    return v.candidates[a].measured_ms < v.candidates[b].measured_ms;
  };
  std::vector<size_t> order(v.candidates.size());  // by figure, lowest first
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), lower);
  // The leaders, measured again with their compute afresh, in alternating
  // order (a slow stretch falls on each in turn); the choice is among them.
  if (o.leaders > 0 && o.fresh_passes > 0) {
    order.resize(std::min(order.size(), static_cast<size_t>(o.leaders)));
    v.leaders = static_cast<int>(order.size());
    for (int pass = 1; pass <= o.fresh_passes; ++pass) {
      std::this_thread::sleep_for(std::chrono::duration<double>(o.pass_pause_s));
      measured.compute().set_fresh_pass(true);
      for (size_t k = 0; k < order.size(); ++k) {
        VerifiedCandidate& c = v.candidates[order[pass % 2 == 1 ? k : order.size() - 1 - k]];
        c.fresh_ms.push_back(predict_plan(task, c.plan, measured).cost_ms);
      }
      measured.compute().set_fresh_pass(false);
    }
    for (size_t i : order) {
      VerifiedCandidate& c = v.candidates[i];
      std::vector<double> all = c.fresh_ms;
      all.push_back(c.measured_ms);
      c.measured_ms = median(all);
    }
  }
  return static_cast<int>(*std::min_element(order.begin(), order.end(), lower));
}

}  // namespace

PlanResult make_verified_plan(Planner& planner, const PlanTask& task, const CostModel& model,
                              const CostModel& truth, const VerifyOptions& o) {
  check_verify_options(o);
  if (o.candidates == 0) return make_plan(planner, task, model);
  PlanResult r = result_header(planner, task, model);
  ShardCosts costs(task, model);
  Verification v;
  v.truth = truth.name;
  ShardCosts measured(task, truth);  // verification's
  std::vector<MeasuredSet> sets;  // by source table: the task's own where it names none
  if (o.measure_tables) measure_tables_alone(task, costs, measured, sets, v);
  // The search's best plans, against the model corrected by every set
  // measured so far (none: the model as it is).
  const auto search = [&]() {
    if (sets.empty()) return planner.plan_candidates(task, costs, o.candidates);
    const CostModel corrected{
        std::make_shared<CorrectedComputeModel>(model.compute,
                                                fit_compute_correction(sets, kCorrectionRidge)),
        model.comm, model.name, model.source};
    PlanTask named = task;
    if (named.source_table.empty()) {
      named.source_table.resize(named.num_tables());
      std::iota(named.source_table.begin(), named.source_table.end(), 0);
    }
    ShardCosts corrected_costs(named, corrected);
    return planner.plan_candidates(named, corrected_costs, o.candidates);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<Plan> plans = search();
  r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.search_summary = planner.search_summary();
  validate_found(task, plans, planner.name());
  r.bound = lower_bound(task, costs);
  const auto verify_start = std::chrono::steady_clock::now();
  std::set<PlanKey> seen;
  for (int round = 0; round < o.rounds; ++round) {
    if (round > 0) {
      plans = search();
      validate_found(task, plans, planner.name());
    }
    const size_t before = v.candidates.size();
    const auto measure = [&](Plan& plan, const std::string& source) {
      if (!seen.insert(plan_key(plan, task.num_devices())).second) return;
      VerifiedCandidate c;
      c.round = round;
      c.source = source;
      c.predicted = predict_plan(task, plan, costs);
      c.measured = predict_plan(task, plan, measured);
      c.passes_ms = {c.measured.cost_ms};
      c.plan = std::move(plan);
      add_measured_sets(task, c, costs, sets);
      v.candidates.push_back(std::move(c));
    };
    for (Plan& plan : plans) measure(plan, planner.name());
    for (const std::string& name : round == 0 ? o.rivals : std::vector<std::string>{}) {
      Plan plan;
      try {
        plan = create_planner(name, {})->plan(task, costs);
      } catch (const Error& e) {  // a heuristic that cannot pack the task
        v.rivals_failed.push_back(fmt::format("{}: {}", name, e.what()));
        continue;
      }
      validate_found(task, {plan}, name);
      measure(plan, name);
    }
    v.rounds = round + 1;
    // Nothing new measured: the next correction, and its plans, would be the same.
    if (round > 0 && v.candidates.size() == before) break;
  }
  measure_again(task, measured, o, v);
  v.chosen = choose_candidate(task, measured, o, v);
  v.verify_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - verify_start).count() +
      v.tables_s;
  r.plan = v.candidates[v.chosen].plan;
  r.predicted = v.candidates[v.chosen].predicted;
  r.floor_warnings = floor_warnings(task, r.plan, r.predicted, costs);
  r.verification = std::move(v);
  return r;
}

}  // namespace embshard
