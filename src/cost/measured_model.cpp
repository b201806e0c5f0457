// The measured compute model: ground truth from the executor, for evaluation.
//
// compute_ms runs the shard's forward + backward + update on the executor
// with the workload's real traces (the shard timer: median of kRepeats steps
// after kWarmup) and caches the result per shard.
#include "embshard/cost/measured_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "embshard/bench/shard_timer.h"
#include "embshard/util/error.h"
#include "embshard/workload/workload.h"

namespace embshard {
namespace {

constexpr int kWarmup = 2;
constexpr int kRepeats = 5;

// The workload table a feature set came from: by source_table when given,
// else the table with the same rows whose pooling factor and reuse are closest.
int match_table(const Workload& w, const TableFeatures& t) {
  if (t.source_table >= 0) {
    ES_CHECK(t.source_table < static_cast<int>(w.tables.size()) &&
                 w.tables[t.source_table].rows == t.rows,
             "measured model: source_table {} is not a table of {} rows in workload '{}' ({} "
             "tables)",
             t.source_table, t.rows, w.dir, w.tables.size());
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

class MeasuredComputeModel : public ComputeModel {
 public:
  MeasuredComputeModel(Workload w, std::unique_ptr<Executor> executor)
      : workload_(std::move(w)),
        executor_(std::move(executor)),
        timer_(workload_, *executor_, timer_options()) {}

  std::string name() const override { return "measured (" + executor_->name() + ")"; }
  int64_t batch_size() const override { return workload_.batch_size; }

  int add_table(const TableFeatures& table) override {
    ES_CHECK(table.dim >= 1 && table.dim <= 1024, "measured model: dim {} is not in 1..1024",
             table.dim);
    const ShardTable t{match_table(workload_, table), table.dim};
    // The same table at the same dim gets the same id, so that its shards
    // share cached timings across callers (e.g. a prediction and a check).
    for (size_t id = 0; id < tables_.size(); ++id) {
      if (tables_[id].table == t.table && tables_[id].dim == t.dim) return static_cast<int>(id);
    }
    tables_.push_back(t);
    return static_cast<int>(tables_.size()) - 1;
  }

  double compute_ms(std::span<const int> table_ids) const override {
    std::vector<int> key(table_ids.begin(), table_ids.end());
    std::sort(key.begin(), key.end());  // a shard is a set: order does not change it
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    std::vector<ShardTable> shard;
    for (int id : key) {
      ES_CHECK(id >= 0 && id < static_cast<int>(tables_.size()),
               "measured model: table id {} is not registered ({} tables)", id, tables_.size());
      shard.push_back(tables_[id]);
    }
    const double ms = shard.empty() ? 0.0 : timer_.time(shard).total_ms;
    ES_CHECK(std::isfinite(ms) && ms >= 0, "measured model: timed {} ms", ms);
    cache_.emplace(std::move(key), ms);
    return ms;
  }

 private:
  static ShardTimerOptions timer_options() {
    ShardTimerOptions o;
    o.warmup = kWarmup;
    o.repeats = kRepeats;
    return o;
  }

  Workload workload_;
  std::unique_ptr<Executor> executor_;
  mutable ShardTimer timer_;
  std::vector<ShardTable> tables_;
  mutable std::mutex mutex_;
  mutable std::map<std::vector<int>, double> cache_;
};

}  // namespace

std::shared_ptr<ComputeModel> make_measured_compute_model(const CostModelOptions& options) {
  ES_CHECK(!options.workload_dir.empty(),
           "measured model: no workload given (the traces it executes)");
  ES_CHECK(options.threads >= 1, "measured model: threads is {}, must be >= 1", options.threads);
  Workload w = load_workload(options.workload_dir);
  ES_CHECK(w.trace_file.has_value(), "measured model: workload '{}' has no trace to execute",
           options.workload_dir);
  ES_CHECK(options.batch_size == 0 || options.batch_size == w.batch_size,
           "measured model: batch size {} requested, but workload '{}' holds batch {} (its "
           "traces can only be executed at their own batch)",
           options.batch_size, options.workload_dir, w.batch_size);
  ExecutorOptions eo;
  eo.threads = options.threads;
  return std::make_shared<MeasuredComputeModel>(std::move(w),
                                                create_executor(options.executor, eo));
}

}  // namespace embshard
