// The measured compute model: ground truth from the executor, for evaluation.
//
// compute_ms measures the shard's forward + backward + update on the
// executor with the workload's real traces against the reference probe (the
// shard timer's measure(): the normalized cost, drift cancelled) and caches
// the result per shard, with its raw median for the raw clock's view. The
// probe's reference is estimated on first use.
#include "embshard/cost/measured_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "embshard/util/error.h"
#include "embshard/workload/workload.h"

namespace embshard {
namespace {

constexpr int kWarmup = 2;

// The workload table a feature set came from: by source_table when given,
// else the table with the same rows whose pooling factor and reuse are closest.
int match_table(const Workload& w, const TableFeatures& t) {
  if (t.source_table >= 0) {
    ES_CHECK(t.source_table < static_cast<int>(w.tables.size()),
             "measured model: source_table {} is not a table of workload '{}' ({} tables)",
             t.source_table, w.dir, w.tables.size());
    const int64_t rows = w.tables[t.source_table].rows;
    if (!t.row_piece) {
      ES_CHECK(rows == t.rows,
               "measured model: source_table {} is not a table of {} rows in workload '{}' "
               "({} rows)",
               t.source_table, t.rows, w.dir, rows);
    } else {
      ES_CHECK(t.source_row_offset >= 0 && t.rows > 0 && t.source_row_offset + t.rows <= rows,
               "measured model: source_table {} of workload '{}' ({} rows) has no rows [{}, {})",
               t.source_table, w.dir, rows, t.source_row_offset, t.source_row_offset + t.rows);
    }
    return t.source_table;
  }
  int best = -1;
  double best_distance = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < w.tables.size(); ++i) {
    const TableSpec& s = w.tables[i];
    if (s.rows != t.rows) continue;
    const double distance = std::abs(s.pooling_factor - t.pooling_factor) /
                                std::max(1e-9, s.pooling_factor) +
                            total_variation(s.row_reuse, t.row_reuse);
    if (distance < best_distance) best_distance = distance, best = static_cast<int>(i);
  }
  ES_CHECK(best >= 0, "measured model: no table of workload '{}' has {} rows", w.dir, t.rows);
  return best;
}

ShardTimerOptions timer_options(const CostModelOptions& options) {
  ShardTimerOptions o;
  o.forward_only = options.forward_only;
  o.warmup = kWarmup;
  o.reference.min_window_ms = 1e3 * options.reference_window_s;
  return o;
}

Workload checked_workload(const CostModelOptions& options) {
  ES_CHECK(!options.workload_dir.empty(),
           "measured model: no workload given (the traces it executes)");
  ES_CHECK(options.threads >= 1, "measured model: threads is {}, must be >= 1", options.threads);
  ES_CHECK(options.reference_window_s >= 0, "measured model: reference window {} s is negative",
           options.reference_window_s);
  Workload w = load_workload(options.workload_dir);
  ES_CHECK(w.trace_file.has_value(), "measured model: workload '{}' has no trace to execute",
           options.workload_dir);
  ES_CHECK(options.batch_size == 0 || options.batch_size == w.batch_size,
           "measured model: batch size {} requested, but workload '{}' holds batch {} (its "
           "traces can only be executed at their own batch)",
           options.batch_size, options.workload_dir, w.batch_size);
  return w;
}

std::unique_ptr<Executor> executor_for(const CostModelOptions& options) {
  ExecutorOptions eo;
  eo.threads = options.threads;
  eo.thread_cpu_time = options.thread_cpu_time;
  return create_executor(options.executor, eo);
}

}  // namespace

MeasuredComputeModel::MeasuredComputeModel(const CostModelOptions& options)
    : workload_(checked_workload(options)),
      executor_(executor_for(options)),
      timer_(workload_, *executor_, timer_options(options)) {}

std::string MeasuredComputeModel::name() const { return "measured (" + executor_name() + ")"; }
std::string MeasuredComputeModel::executor_name() const { return executor_->name(); }

int MeasuredComputeModel::add_table(const TableFeatures& table) {
  ES_CHECK(table.dim >= 1 && table.dim <= 1024, "measured model: dim {} is not in 1..1024",
           table.dim);
  ES_CHECK(table.batch_slices >= 1 && table.batch_slice >= 0 &&
               table.batch_slice < table.batch_slices,
           "measured model: batch slice {} of {}", table.batch_slice, table.batch_slices);
  const int source = match_table(workload_, table);
  const bool whole = !table.row_piece;
  const ShardTable t{source,
                     table.dim,
                     table.source_row_offset,
                     whole ? 0 : table.rows,
                     table.batch_slice,
                     table.batch_slices,
                     table.data_type};
  for (size_t id = 0; id < tables_.size(); ++id) {
    if (tables_[id] == t) return static_cast<int>(id);
  }
  tables_.push_back(t);
  return static_cast<int>(tables_.size()) - 1;
}

namespace {

std::vector<int> set_key(std::span<const int> table_ids) {
  std::vector<int> key(table_ids.begin(), table_ids.end());
  std::sort(key.begin(), key.end());  // a shard is a set: order does not change it
  return key;
}

}  // namespace

const MeasuredComputeModel::Figures& MeasuredComputeModel::measured(
    std::span<const int> table_ids) const {
  auto key = std::make_pair(pass_, set_key(table_ids));
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::vector<ShardTable> shard;
  for (int id : key.second) {
    ES_CHECK(id >= 0 && id < static_cast<int>(tables_.size()),
             "measured model: table id {} is not registered ({} tables)", id, tables_.size());
    shard.push_back(tables_[id]);
  }
  Figures f{0, 0};
  if (!shard.empty()) {
    const ShardMeasurement m = timer_.measure(
        shard, fmt::format("measured model: shard {} (pass {})", cache_.size(), pass_));
    f = {m.normalized.total_ms, m.raw.total_ms};
  }
  for (double ms : {f.normalized_ms, f.raw_ms}) {
    ES_CHECK(std::isfinite(ms) && ms >= 0, "measured model: measured {} ms", ms);
  }
  return cache_.emplace(std::move(key), f).first->second;
}

double MeasuredComputeModel::compute_ms(std::span<const int> table_ids) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return measured(table_ids).normalized_ms;
}

double MeasuredComputeModel::raw_ms(std::span<const int> table_ids) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return measured(table_ids).raw_ms;
}

void MeasuredComputeModel::set_fresh_pass(bool fresh) {
  std::lock_guard<std::mutex> lock(mutex_);
  pass_ = fresh ? ++passes_ : 0;
}

int MeasuredComputeModel::times_measured(std::span<const int> table_ids) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<int> key = set_key(table_ids);
  int times = 0;
  for (const auto& [pass_and_set, figures] : cache_) times += pass_and_set.second == key ? 1 : 0;
  return times;
}

ProbeReference MeasuredComputeModel::probe_reference() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timer_.probe_reference();
}

void MeasuredComputeModel::set_probe_reference(const ProbeReference& reference) {
  std::lock_guard<std::mutex> lock(mutex_);
  timer_.set_probe_reference(reference);
}

std::shared_ptr<MeasuredComputeModel> make_measured_compute_model(
    const CostModelOptions& options) {
  return std::make_shared<MeasuredComputeModel>(options);
}

namespace {

class RawClockView : public ComputeModel {
 public:
  explicit RawClockView(std::shared_ptr<MeasuredComputeModel> m) : m_(std::move(m)) {}
  std::string name() const override { return m_->name() + " on the raw clock"; }
  int64_t batch_size() const override { return m_->batch_size(); }
  int add_table(const TableFeatures& table) override { return m_->add_table(table); }
  double compute_ms(std::span<const int> table_ids) const override {
    return m_->raw_ms(table_ids);
  }
  void set_fresh_pass(bool fresh) override { m_->set_fresh_pass(fresh); }

 private:
  std::shared_ptr<MeasuredComputeModel> m_;
};

}  // namespace

std::shared_ptr<ComputeModel> raw_clock_view(std::shared_ptr<MeasuredComputeModel> measured) {
  return std::make_shared<RawClockView>(std::move(measured));
}

}  // namespace embshard
