// The pure half of `bench comm`: sample drawing, option checks, the header.
#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/comm.h"
#include "embshard/measure/alltoall.h"
#include "embshard/cost/cost_data.h"
#include "embshard/cost/cost_model.h"
#include "embshard/util/error.h"
#include "embshard/util/json_field.h"
#include "embshard/util/statistics.h"
#include "embshard/util/machine.h"
#include "embshard/util/random.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"

namespace embshard {
namespace {

// Largest dim first, each table to the device with the smallest dim sum (the
// lowest index on ties).
void place_greedy(CommSample& s, int num_devices) {
  std::vector<int> order(s.table_dims.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return s.table_dims[a] > s.table_dims[b]; });
  std::vector<int64_t> sums(num_devices, 0);
  for (int t : order) {
    const int device = static_cast<int>(std::min_element(sums.begin(), sums.end()) - sums.begin());
    s.table_device[t] = device;
    sums[device] += s.table_dims[t];
  }
}

}  // namespace

CommSample draw_comm_sample(const CommBenchOptions& o, int num_devices, int64_t index) {
  // A stream apart from bench compute's for the same (seed, index).
  std::mt19937_64 rng(item_seed(o.seed, index) ^
                      splitmix64(static_cast<uint64_t>(SeedUse::kCommSample) +
                                 static_cast<uint64_t>(num_devices)));
  CommSample s;
  const int64_t min_tables = int64_t{num_devices} * o.tables_per_device[0];
  const int64_t max_tables = int64_t{num_devices} * o.tables_per_device[1];
  const int64_t tables = std::uniform_int_distribution<int64_t>(min_tables, max_tables)(rng);
  std::uniform_int_distribution<size_t> pick_dim(0, o.dims.size() - 1);
  for (int64_t t = 0; t < tables; ++t) s.table_dims.push_back(o.dims[pick_dim(rng)]);
  s.table_device.assign(s.table_dims.size(), 0);
  place_greedy(s, num_devices);

  s.move_share = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<int> pick_device(0, num_devices - 1);
  for (int& device : s.table_device) {
    if (coin(rng) < s.move_share) device = pick_device(rng);
  }
  s.dim_sums.assign(num_devices, 0);
  s.num_tables.assign(num_devices, 0);
  for (size_t t = 0; t < s.table_dims.size(); ++t) {
    s.dim_sums[s.table_device[t]] += s.table_dims[t];
    s.num_tables[s.table_device[t]] += 1;
  }

  std::uniform_real_distribution<double> delay(0.0, o.max_delay_ms);
  for (int d = 0; d < num_devices; ++d) s.delays_ms.push_back(o.max_delay_ms > 0 ? delay(rng) : 0);
  const double min_delay = *std::min_element(s.delays_ms.begin(), s.delays_ms.end());
  for (double& d : s.delays_ms) d -= min_delay;
  return s;
}

CollectiveLoad draw_collective_load(const CommBenchOptions& o, int num_devices, int64_t index) {
  const CommSample s = draw_comm_sample(o, num_devices, index);
  std::mt19937_64 rng(item_seed(o.seed, index) ^
                      splitmix64(static_cast<uint64_t>(SeedUse::kCollectiveLoad) +
                                 static_cast<uint64_t>(num_devices)));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double pooling = std::pow(200.0, u(rng));
  const double n = num_devices;
  // Each device's row shards look up the global batch; its own slice stays home.
  std::vector<double> global(num_devices);
  for (int d = 0; d < num_devices; ++d) {
    global[d] = index_exchange_bytes(pooling, o.batch, s.num_tables[d]);
  }
  const double total = std::accumulate(global.begin(), global.end(), 0.0);
  CollectiveLoad load;
  load.reset(num_devices);
  for (int d = 0; d < num_devices; ++d) {
    load.rw_dim_sums[d] = static_cast<double>(s.dim_sums[d]);
    load.index_recv_bytes[d] = std::round(global[d] * (n - 1) / n);
    load.index_send_bytes[d] = std::round((total - global[d]) / n);
  }
  if (u(rng) < 0.75) load.allreduce_bytes = std::round(65536.0 * std::pow(1024.0, u(rng)) / 4) * 4;
  return load;
}

void check_comm_options(const CommBenchOptions& o, int num_devices) {
  ES_CHECK(o.reference_runs >= 1, "bench comm: --reference-runs is {}, must be >= 1",
           o.reference_runs);
  ES_CHECK(o.passes >= 1 && o.passes <= 100, "bench comm: --passes is {}, must be in 1..100",
           o.passes);
  ES_CHECK(o.pass_block_s > 0 && o.pass_block_s <= 3600,
           "bench comm: --pass-block-s is {}, must be in (0, 3600]", o.pass_block_s);
  ES_CHECK(num_devices >= 1, "bench comm: {} MPI ranks, need at least 1", num_devices);
  ES_CHECK(o.samples >= 0, "bench comm: --samples is {}, must be >= 0", o.samples);
  ES_CHECK(o.batch >= num_devices && o.batch % num_devices == 0 && o.batch / num_devices <= INT_MAX,
           "bench comm: --batch is {}, must be a positive multiple of the number of ranks ({}) "
           "so that every rank gets batch / N rows",
           o.batch, num_devices);
  ES_CHECK(o.max_delay_ms >= 0 && o.max_delay_ms <= 60'000,
           "bench comm: --max-delay-ms is {}, must be in 0..60000", o.max_delay_ms);
  ES_CHECK(o.timeout_s > 0, "bench comm: --timeout-s is {}, must be positive", o.timeout_s);
  ES_CHECK(o.max_delay_ms < 500 * o.timeout_s,
           "bench comm: --max-delay-ms {} must be under half of --timeout-s {} (in ms)",
           o.max_delay_ms, o.timeout_s);
  ES_CHECK(o.repeats >= 1 && o.warmup >= 0, "bench comm: --repeats {} / --warmup {} invalid",
           o.repeats, o.warmup);
  ES_CHECK(o.probe_dim >= 1 && o.probe_dim <= 4096,
           "bench comm: --probe-dim is {}, must be in 1..4096", o.probe_dim);
  ES_CHECK(!o.dims.empty(), "bench comm: --dims is empty");
  for (int dim : o.dims) {
    ES_CHECK(dim >= 1 && dim <= 4096, "bench comm: --dims holds {}, dims must be in 1..4096", dim);
  }
  const auto& t = o.tables_per_device;
  ES_CHECK(t.size() == 2 && t[0] >= 0 && t[1] >= t[0] && t[1] >= 1 && t[1] <= 100'000,
           "bench comm: --tables-per-device is '{}', must be MIN,MAX with 0 <= MIN <= MAX, "
           "1 <= MAX <= 100000",
           fmt::join(t, ","));
  // The densest placement (every table on one device) must keep its dim sum an int.
  const int64_t max_dim = *std::max_element(o.dims.begin(), o.dims.end());
  ES_CHECK(int64_t{num_devices} * t[1] * max_dim <= INT_MAX,
           "bench comm: {} ranks x --tables-per-device max {} x dim {} overflows a dim sum",
           num_devices, t[1], max_dim);
}

std::vector<double> exchange_references_of(const nlohmann::json& header, const std::string& path,
                                           int num_devices, int64_t batch, int probe_dim) {
  const nlohmann::json format = header.value("format", nlohmann::json()),
                       version = header.value("version", nlohmann::json());
  ES_CHECK(format == kCommFormat || format == kCollectiveFormat,
           "{}: format is {}, expected '{}' or '{}' (a file of `embshard bench comm`)", path,
           format.dump(), kCommFormat, kCollectiveFormat);
  ES_CHECK(version.is_number_integer() && version.get<int>() >= 2 && header.contains("probe"),
           "{}: a version {} file holds no reference exchange times (re-measure it with this "
           "embshard)",
           path, version.dump());
  const auto ms = json_field(header, "/probe/reference_ms", JsonKind::kNumbers, path)
                      .get<std::vector<double>>();
  ES_CHECK(static_cast<int>(ms.size()) == num_devices,
           "{}: probe.reference_ms holds {} ranks' times, the run has {} ranks", path, ms.size(),
           num_devices);
  const int64_t file_batch =
      json_field(header, "/batch_size", JsonKind::kCount, path).get<int64_t>();
  ES_CHECK(file_batch == batch,
           "{}: field 'batch_size' is {}, the run's batch is {}: its reference exchange is "
           "another one",
           path, file_batch, batch);
  const nlohmann::json* dim = json_optional(header, "/probe/exchange_dim", JsonKind::kCount, path);
  const int64_t file_dim = dim ? dim->get<int64_t>() : kReferenceExchangeDim;
  ES_CHECK(file_dim == probe_dim,
           "{}: field 'probe.exchange_dim' is {}, the run's reference exchange has {} columns "
           "(--probe-dim): its reference time is another exchange's",
           path, file_dim, probe_dim);
  for (double m : ms) {
    ES_CHECK(std::isfinite(m) && m > 0, "{}: probe.reference_ms holds {}, must be positive", path,
             m);
  }
  return ms;
}

nlohmann::json comm_bench_header(const CommBenchOptions& o, int num_devices,
                                 const std::vector<std::string>& rank_hosts,
                                 const std::vector<double>& reference_ms) {
  nlohmann::json machine = machine_info();
  machine["rank_hosts"] = rank_hosts;
  nlohmann::json header = {{"format", o.collectives ? kCollectiveFormat : kCommFormat},
          {"version", kCostDataVersion},
          {"embshard_version", EMBSHARD_VERSION},
          {"machine", machine},
          {"num_devices", num_devices},
          {"batch_size", o.batch},
          {"seed", o.seed},
          {"dims", o.dims},
          {"tables_per_device", o.tables_per_device},
          {"max_delay_ms", o.max_delay_ms},
          {"warmup", o.warmup},
          {"repeats", o.repeats},
          {"dtype", "float32"},
          // Every rank's quiet time of the reference exchange (alltoall.h).
          {"probe", {{"exchange_dim", o.probe_dim}, {"reference_ms", reference_ms}}}};
  if (!o.reference_from.empty()) header["probe"]["reference_from"] = o.reference_from;
  if (o.passes > 1) header["passes"] = o.passes;  // absent: one (files of before it match)
  return header;
}

const std::vector<std::string>& comm_bench_must_match() {
  static const std::vector<std::string> fields = {
      "format", "version",           "machine",      "num_devices", "batch_size", "seed",
      "dims",   "tables_per_device", "max_delay_ms", "warmup",      "repeats",    "passes"};
  return fields;
}

namespace {

// How a figure comes from its passes (fastest_half_mean).
std::string passes_summary(int passes) {
  if (passes <= 1) return "";
  if (passes <= 3) return fmt::format(", fastest of {} passes", passes);
  return fmt::format(", mean of the fastest {} of {} passes", passes / 2, passes);
}

// A header's count for the tables below, `absent` where the file has none
// (an older version's); one of another type is named.
int64_t count_in(const nlohmann::json& header, const char* pointer, const std::string& path,
                 int64_t absent = 0) {
  const nlohmann::json* v = json_optional(header, pointer, JsonKind::kCount, path);
  return v ? v->get<int64_t>() : absent;
}

// "median of R runs after W warm-up", and the passes when there were several.
std::string measurement_of(const nlohmann::json& header, const std::string& path) {
  return fmt::format("median of {} runs after {} warm-up{}", count_in(header, "/repeats", path),
                     count_in(header, "/warmup", path),
                     passes_summary(static_cast<int>(count_in(header, "/passes", path, 1))));
}

double median_of(const std::vector<double>& values) { return values.empty() ? 0 : median(values); }

// "lo..hi" of a per-rank array (not empty).
std::string min_max(const std::vector<double>& v, const char* format) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return fmt::format(fmt::runtime(format), *lo) + ".." + fmt::format(fmt::runtime(format), *hi);
}

// A --collectives file: measured against the analytic formula, slowest rank.
std::string collective_records_table(const std::string& path, const nlohmann::json& header,
                                     int64_t show) {
  LoadOptions strict;
  strict.check = RecordCheck::kStrict;
  const CollectiveData data = load_collective_data(path, strict);
  const int n = data.num_devices;
  CostModelOptions mo;
  mo.batch_size = data.batch_size;
  const auto analytic = create_comm_model("analytic", mo);
  TextTable table({"sample", "row-shard cols", "index MB (max)", "all-reduce MB",
                   "fwd ms (ranks)", "analytic fwd", "bwd ms (ranks)", "analytic bwd"});
  const size_t count = data.records.size();
  const size_t first = count > static_cast<size_t>(show) ? count - show : 0;
  auto max_of = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::vector<double> fwd_err, bwd_err;
  for (size_t i = 0; i < count; ++i) {
    const CollectiveRecord& r = data.records[i];
    std::vector<double> pf(n, 0.0), pb(n, 0.0);
    analytic->collective_ms(r.load, pf, pb);
    const double mf = max_of(r.fwd_ms), mb = max_of(r.bwd_ms), af = max_of(pf), ab = max_of(pb);
    if (mf > 0) fwd_err.push_back(100 * std::abs(af - mf) / mf);
    if (mb > 0) bwd_err.push_back(100 * std::abs(ab - mb) / mb);
    if (i < first) continue;
    table.add_row({std::to_string(i), min_max(r.load.rw_dim_sums, "{:.0f}"),
                   fmt::format("{:.2f}", max_of(r.load.index_recv_bytes) / 1e6),
                   fmt::format("{:.2f}", r.load.allreduce_bytes / 1e6), min_max(r.fwd_ms, "{:.3f}"),
                   fmt::format("{:.3f}", af), min_max(r.bwd_ms, "{:.3f}"),
                   fmt::format("{:.3f}", ab)});
  }
  return fmt::format("{} collective costs in {} ({} ranks, batch {}, {}){}\n{}the analytic formula "
                     "({}) against the slowest rank: median error fwd {:.1f}%, bwd {:.1f}%\n",
                     count, path, n, data.batch_size, measurement_of(header, path),
                     first > 0 ? fmt::format("; the last {}:", count - first) : ":",
                     table.render(), analytic->name(), median_of(fwd_err), median_of(bwd_err));
}

}  // namespace

std::string comm_records_table(const std::string& path, int64_t show) {
  nlohmann::json header;
  const auto records = RecordFile::read_all(path, &header, nullptr);
  if (header.value("format", nlohmann::json()) == kCollectiveFormat) {
    return collective_records_table(path, header, show);
  }
  TextTable table({"sample", "tables", "dim sums", "max delay ms", "fwd ms (ranks)",
                   "bwd ms (ranks)"});
  const size_t first = records.size() > static_cast<size_t>(show) ? records.size() - show : 0;
  std::vector<double> max_fwd, max_bwd;
  for (size_t i = 0; i < records.size(); ++i) {
    // By pointer: a field missing or of another type in an edited file is
    // named, not read past the end.
    const nlohmann::json& r = records[i];
    const std::string where = fmt::format("{}: record {}", path, i + 1);
    const auto numbers = [&](const char* pointer) {
      auto v = json_field(r, pointer, JsonKind::kNumbers, where).get<std::vector<double>>();
      ES_CHECK(!v.empty(), "{}: field '{}' is empty", where, pointer);
      return v;
    };
    const auto fwd = numbers("/fwd_ms"), bwd = numbers("/bwd_ms"), delays = numbers("/delays_ms");
    max_fwd.push_back(*std::max_element(fwd.begin(), fwd.end()));
    max_bwd.push_back(*std::max_element(bwd.begin(), bwd.end()));
    if (i < first) continue;
    int64_t tables = 0;
    for (const auto& t : json_field(r, "/num_tables", JsonKind::kCounts, where)) {
      tables += t.get<int64_t>();
    }
    table.add_row({std::to_string(json_field(r, "/sample", JsonKind::kCount, where).get<int64_t>()),
                   std::to_string(tables),
                   min_max(numbers("/dim_sums"), "{:.0f}"),
                   fmt::format("{:.2f}", *std::max_element(delays.begin(), delays.end())),
                   min_max(fwd, "{:.3f}"), min_max(bwd, "{:.3f}")});
  }
  return fmt::format(
      "{} all-to-all costs in {} ({} ranks, batch {}, {}){}\n{}median over samples "
      "of the slowest rank: fwd {:.3f} ms, bwd {:.3f} ms\n",
      records.size(), path, count_in(header, "/num_devices", path),
      // Version 1 files spell it "batch".
      count_in(header, header.contains("batch_size") ? "/batch_size" : "/batch", path),
      measurement_of(header, path),
      first > 0 ? fmt::format("; the last {}:", records.size() - first) : ":", table.render(),
      median_of(max_fwd), median_of(max_bwd));
}

}  // namespace embshard
