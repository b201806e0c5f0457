// The one shard timer.
#include "embshard/bench/shard_timer.h"

#include <algorithm>

#include "embshard/util/error.h"

namespace embshard {
namespace {

constexpr uint64_t kTraceBudgetBytes = uint64_t{4} << 30;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

ShardTimer::ShardTimer(const Workload& workload, Executor& executor, ShardTimerOptions options)
    : workload_(workload),
      executor_(executor),
      options_(options),
      reader_(std::make_unique<TraceReader>(workload.trace_path())) {
  ES_CHECK(options.repeats >= 1 && options.warmup >= 0,
           "shard timer: repeats {} / warmup {} invalid (need >= 1 / >= 0)", options.repeats,
           options.warmup);
}

ShardTimer::~ShardTimer() = default;

const TableTrace& ShardTimer::trace(int table) {
  auto it = traces_.find(table);
  if (it != traces_.end()) return it->second;
  TableTrace t = reader_->read_table(static_cast<uint64_t>(table));
  trace_bytes_ += (t.offsets.size() + t.indices.size()) * sizeof(int64_t);
  return traces_.emplace(table, std::move(t)).first->second;
}

ShardTiming ShardTimer::time(const std::vector<ShardTable>& shard) {
  // Evict between shards only: the shard's traces are borrowed until it is timed.
  if (trace_bytes_ > kTraceBudgetBytes) {
    traces_.clear();
    trace_bytes_ = 0;
  }
  ShardInput input;
  input.batch_size = workload_.batch_size;
  input.pooling = options_.pooling;
  input.optimizer = options_.optimizer;
  for (const ShardTable& s : shard) {
    ES_CHECK(s.table >= 0 && s.table < static_cast<int>(workload_.tables.size()),
             "shard timer: table {} is not in workload '{}' ({} tables)", s.table, workload_.dir,
             workload_.tables.size());
    const TableTrace& t = trace(s.table);
    input.tables.push_back({workload_.tables[s.table].rows, s.dim, t.offsets.data(),
                            t.indices.data()});
  }
  std::unique_ptr<PreparedShard> prepared = executor_.prepare(input);
  std::vector<double> fwd, bwd, total;
  for (int run = 0; run < options_.warmup + options_.repeats; ++run) {
    const StepTiming t = prepared->step();
    if (run < options_.warmup) continue;
    fwd.push_back(t.fwd_ms);
    bwd.push_back(t.bwd_ms);
    total.push_back(t.total_ms());
  }
  return {median(fwd), median(bwd), median(total)};
}

}  // namespace embshard
