// The one shard timer.
#include "embshard/measure/shard_timer.h"

#include <algorithm>
#include <random>

#include "embshard/util/error.h"
#include "embshard/util/random.h"
#include "embshard/util/statistics.h"
#include "embshard/workload/trace_shard.h"

namespace embshard {
namespace {

constexpr uint64_t kTraceBudgetBytes = uint64_t{4} << 30;

// The reference probe's tables: rows, dim, lookups per bag, skewed (u^3 with
// the hot rows scattered, as real traces are).
struct ProbeTable {
  int64_t rows;
  int dim;
  int pooling;
  bool skewed;
};
constexpr int64_t kProbeBatch = 2048;
constexpr uint64_t kProbeSeed = 20261122;
const ProbeTable kProbeTables[] = {
    {int64_t{1} << 19, 64, 16, false},  // 128 MiB: DRAM-bound gathers and updates
    {20000, 32, 8, true},               // mid-sized, skewed: mostly cached
    {2000, 128, 4, false},              // hot: call and per-table overheads
};

TableTrace probe_trace(const ProbeTable& p, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  TableTrace t;
  t.offsets.push_back(0);
  for (int64_t b = 0; b < kProbeBatch; ++b) {
    for (int i = 0; i < p.pooling; ++i) {
      const double x = u(rng);
      int64_t row = std::min(p.rows - 1, static_cast<int64_t>((p.skewed ? x * x * x : x) * p.rows));
      if (p.skewed) row = static_cast<int64_t>((static_cast<uint64_t>(row) * 0x9E3779B1ull) % p.rows);
      t.indices.push_back(row);
    }
    t.offsets.push_back(static_cast<int64_t>(t.indices.size()));
  }
  return t;
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

const TableTrace& ShardTimer::piece_trace(const ShardTable& s) {
  const TableSpec& spec = workload_.tables[s.table];
  const int64_t rows = s.rows > 0 ? s.rows : spec.rows;
  if (rows == spec.rows && s.batch_slices == 1) return trace(s.table);
  const auto key = std::make_tuple(s.table, s.row_offset, rows, s.batch_slice, s.batch_slices);
  auto it = piece_traces_.find(key);
  if (it != piece_traces_.end()) return it->second;
  ES_CHECK(s.row_offset >= 0 && s.row_offset + rows <= spec.rows,
           "shard timer: table '{}': rows [{}, {}) outside its {} rows", spec.name, s.row_offset,
           s.row_offset + rows, spec.rows);
  const TableTrace& whole = trace(s.table);
  TableTrace t = rows == spec.rows ? whole : row_shard_trace(whole, s.row_offset, rows);
  if (s.batch_slices > 1) t = batch_slice_trace(t, s.batch_slice, s.batch_slices);
  trace_bytes_ += (t.offsets.size() + t.indices.size()) * sizeof(int64_t);
  return piece_traces_.emplace(key, std::move(t)).first->second;
}

std::unique_ptr<PreparedShard> ShardTimer::prepare(const std::vector<ShardTable>& shard) {
  // Evict between shards only: the shard's traces are borrowed until it is timed.
  if (trace_bytes_ > kTraceBudgetBytes) {
    traces_.clear();
    piece_traces_.clear();
    trace_bytes_ = 0;
  }
  ShardInput input;
  input.batch_size = workload_.batch_size;
  input.pooling = options_.pooling;
  input.optimizer = options_.optimizer;
  input.forward_only = options_.forward_only;
  for (const ShardTable& s : shard) {
    ES_CHECK(s.table >= 0 && s.table < static_cast<int>(workload_.tables.size()),
             "shard timer: table {} is not in workload '{}' ({} tables)", s.table, workload_.dir,
             workload_.tables.size());
    const TableTrace& t = piece_trace(s);
    // A row block that no lookup of the batch falls in has no indices (a
    // valid piece: its rows are held all the same); the executor still
    // takes a pointer.
    static const int64_t kNoIndices = 0;
    input.tables.push_back({s.rows > 0 ? s.rows : workload_.tables[s.table].rows, s.dim,
                            t.offsets.data(), t.indices.empty() ? &kNoIndices : t.indices.data(),
                            s.data_type});
  }
  return executor_.prepare(input);
}

ShardTiming ShardTimer::time(const std::vector<ShardTable>& shard) {
  std::unique_ptr<PreparedShard> prepared = prepare(shard);
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

PreparedShard& ShardTimer::probe() {
  if (probe_owner_) return probe_owner_->probe();
  if (probe_) return *probe_;
  std::mt19937_64 rng(kProbeSeed);
  ShardInput input;
  input.batch_size = kProbeBatch;
  input.pooling = options_.pooling;
  input.optimizer = options_.optimizer;
  probe_traces_.clear();
  for (const ProbeTable& p : kProbeTables) probe_traces_.push_back(probe_trace(p, rng));
  for (size_t i = 0; i < probe_traces_.size(); ++i) {
    input.tables.push_back({kProbeTables[i].rows, kProbeTables[i].dim,
                            probe_traces_[i].offsets.data(), probe_traces_[i].indices.data()});
  }
  probe_ = executor_.prepare(input);
  return *probe_;
}

const ProbeReference& ShardTimer::probe_reference() {
  if (!has_reference_) {
    ProbeReferenceOptions o = options_.reference;
    if (o.label.empty()) o.label = "the reference probe on " + executor_.name();
    PreparedShard& p = probe();
    reference_ = estimate_probe_reference([&p] { return p.step().total_ms(); }, o);
    has_reference_ = true;
  }
  return reference_;
}

void ShardTimer::share_probe(ShardTimer& owner) {
  ES_CHECK(&owner.executor_ == &executor_,
           "shard timer: a shared probe must run on the timer's own executor");
  probe_owner_ = owner.probe_owner_ ? owner.probe_owner_ : &owner;
}

void ShardTimer::set_probe_reference(const ProbeReference& reference) {
  ES_CHECK(std::isfinite(reference.reference_ms) && reference.reference_ms > 0,
           "shard timer: probe reference {} ms, must be positive", reference.reference_ms);
  reference_ = reference;
  has_reference_ = true;
}

ShardMeasurement ShardTimer::measure(const std::vector<ShardTable>& shard,
                                     const std::string& label) {
  const double reference_ms = probe_reference().reference_ms;
  PreparedShard& p = probe();
  std::unique_ptr<PreparedShard> work = prepare(shard);
  for (int run = 0; run < options_.warmup; ++run) work->step();
  std::vector<double> fwd, bwd;
  const TimerFn work_fn = [&] {
    const StepTiming t = work->step();
    fwd.push_back(t.fwd_ms);
    bwd.push_back(t.bwd_ms);
    return t.total_ms();
  };
  InterleavedOptions o = options_.interleave;
  o.label = label;
  o.seed = item_seed(options_.interleave.seed, measured_++);
  ShardMeasurement m;
  m.interleaved =
      measure_interleaved(work_fn, {[&p] { return p.step().total_ms(); }}, {reference_ms}, o);
  // The work's own steps include its warm-up rounds: the timed ones are last.
  const size_t timed = m.interleaved.work_ms.size();
  fwd.erase(fwd.begin(), fwd.end() - static_cast<std::ptrdiff_t>(timed));
  bwd.erase(bwd.begin(), bwd.end() - static_cast<std::ptrdiff_t>(timed));
  m.raw = {median(fwd), median(bwd), m.interleaved.raw_ms};
  const double total = m.interleaved.normalized_ms;
  const double fwd_share = m.raw.fwd_ms / (m.raw.fwd_ms + m.raw.bwd_ms);
  m.normalized = {total * fwd_share, total * (1 - fwd_share), total};
  return m;
}

nlohmann::json reference_probe_json() {
  nlohmann::json tables = nlohmann::json::array();
  for (const ProbeTable& p : kProbeTables) {
    tables.push_back({{"rows", p.rows}, {"dim", p.dim}, {"pooling", p.pooling},
                      {"skewed", p.skewed}});
  }
  return {{"batch_size", kProbeBatch}, {"seed", kProbeSeed}, {"tables", tables}};
}

}  // namespace embshard
