// Synthetic trace generation: one table at a time, from its plan.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/workload/synth.h"
#include "synth_internal.h"
#include "synth_random.h"

namespace embshard {
namespace {

using namespace synth_detail;

// Appends `rows` access counts in [lo, hi] summing exactly to `lookups`,
// leaning to the low end of the range as real count distributions do.
void append_bin_counts(int64_t rows, int64_t lookups, int64_t lo, int64_t hi, Rng& rng,
                       std::vector<int64_t>& out) {
  if (rows == 0) return;
  const int64_t width = hi - lo, extra = lookups - rows * lo;
  ES_CHECK(extra >= 0 && extra <= rows * width,
           "synth: {} lookups cannot be split into {} rows of {}..{} accesses", lookups, rows, lo,
           hi);
  std::vector<double> e(rows);
  double sum = 0;
  for (double& v : e) {
    const double u = uniform01(rng);
    v = width * u * u;
    sum += v;
  }
  if (sum >= extra) {  // shrink towards lo
    for (double& v : e) v *= sum > 0 ? extra / sum : 0.0;
  } else {  // shrink the room left towards hi
    const double f = static_cast<double>(rows * width - extra) / (rows * width - sum);
    for (double& v : e) v = width - (width - v) * f;
  }
  std::vector<int64_t> c(rows);
  int64_t deficit = extra;
  for (int64_t i = 0; i < rows; ++i) {
    c[i] = std::clamp<int64_t>(static_cast<int64_t>(std::floor(e[i])), 0, width);
    deficit -= c[i];
  }
  for (int pass = 0; deficit != 0; ++pass) {  // rounding: first where the fraction was cut
    ES_CHECK(pass < 3, "synth: cannot round {} counts to sum {}", rows, lookups);
    for (int64_t i = 0; i < rows && deficit != 0; ++i) {
      if (deficit > 0 && c[i] < width && (pass > 0 || e[i] > c[i])) c[i] += 1, --deficit;
      if (deficit < 0 && c[i] > 0) c[i] -= 1, ++deficit;
    }
  }
  for (int64_t v : c) out.push_back(lo + v);
}

// `count` distinct values from [0, range), in random order.
std::vector<int64_t> sample_distinct(int64_t count, int64_t range, Rng& rng) {
  ES_CHECK(count <= range, "synth: cannot pick {} distinct rows out of {}", count, range);
  std::vector<int64_t> ids;
  if (range <= 4 * count + 1024) {  // dense: partial Fisher-Yates over all ids
    ids.resize(range);
    std::iota(ids.begin(), ids.end(), int64_t{0});
    for (int64_t i = 0; i < count; ++i) {
      std::swap(ids[i], ids[i + uniform_below(rng, range - i)]);
    }
    ids.resize(count);
    return ids;
  }
  // Sparse: draw, deduplicate, repeat; collisions are rare at < 25% density.
  while (static_cast<int64_t>(ids.size()) < count) {
    const int64_t need = count - static_cast<int64_t>(ids.size());
    for (int64_t i = 0; i < need + need / 8 + 16; ++i) {
      ids.push_back(static_cast<int64_t>(uniform_below(rng, range)));
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
  shuffle(ids, rng);
  ids.resize(count);
  return ids;
}

// Bag boundaries for `lookups` over `batch` bags. Up to one lookup per bag,
// a random subset of bags gets one; otherwise bag lengths follow gamma
// weights (shape 1: very uneven) with a share of empty bags.
std::vector<int64_t> bag_offsets(int64_t batch, int64_t lookups, const SynthTablePlan& p,
                                 Rng& rng) {
  std::vector<double> weights(batch, 0.0);
  if (lookups <= batch) {
    for (int64_t b : sample_distinct(lookups, batch, rng)) weights[b] = 1.0;
  } else {
    for (double& w : weights) {
      w = uniform01(rng) < p.empty_bag_share ? 0.0 : gamma_int(rng, p.bag_shape);
    }
    if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) {
      std::fill(weights.begin(), weights.end(), 1.0);
    }
  }
  const auto lengths = apportion(lookups, weights);
  std::vector<int64_t> offsets(batch + 1, 0);
  for (int64_t b = 0; b < batch; ++b) offsets[b + 1] = offsets[b] + lengths[b];
  return offsets;
}

}  // namespace

TableTrace generate_table_trace(const SynthPlan& plan, size_t t) {
  ES_CHECK(t < plan.tables.size(), "synth: table {} out of range ({} tables)", t,
           plan.tables.size());
  const SynthTablePlan& p = plan.tables[t];
  Rng rng(p.seed);
  std::vector<int64_t> counts;
  counts.reserve(p.unique_rows());
  for (int k = 0; k < kReuseBins; ++k) {
    append_bin_counts(p.rows_per_bin[k], p.lookups_per_bin[k], bin_count_lower(k),
                      bin_count_upper(k), rng, counts);
  }
  const std::vector<int64_t> ids = sample_distinct(p.unique_rows(), p.rows, rng);
  TableTrace trace;
  trace.indices.reserve(p.num_indices());
  for (size_t i = 0; i < ids.size(); ++i) trace.indices.insert(trace.indices.end(), counts[i], ids[i]);
  shuffle(trace.indices, rng);
  trace.offsets = bag_offsets(plan.options.batch_size, p.num_indices(), p, rng);
  return trace;
}

std::vector<TableSpec> write_synth_traces(const SynthPlan& plan, TraceWriter& writer,
                                          const SynthProgress& progress) {
  std::vector<TableSpec> specs;
  for (size_t t = 0; t < plan.tables.size(); ++t) {
    const SynthTablePlan& p = plan.tables[t];
    const TableTrace trace = generate_table_trace(plan, t);  // freed before the next table
    writer.add_table(trace);
    TableSpec spec;
    spec.name = p.name;
    spec.rows = p.rows;
    spec.dim = p.dim;
    fill_table_spec(compute_table_stats(trace, p.rows, "synth: table " + p.name), spec);
    specs.push_back(spec);
    if (progress) progress(t, plan.tables.size(), spec);
  }
  return specs;
}

namespace {

// The plan's traces into out_dir (trace.bin, then tables.json), nothing left
// behind on failure.
Workload write_synth_workload(const SynthPlan& plan, const std::string& source,
                              const std::string& out_dir, const SynthProgress& progress) {
  OutputDirectoryGuard directory(out_dir);
  Workload w;
  w.dir = out_dir;
  w.batch_size = plan.options.batch_size;
  w.source = source;
  w.trace_file = kTraceFile;
  TraceWriter writer((std::filesystem::path(out_dir) / kTraceFile).string(),
                     static_cast<uint64_t>(plan.tables.size()),
                     static_cast<uint64_t>(plan.options.batch_size), plan.options.index_bytes);
  w.tables = write_synth_traces(plan, writer, progress);
  writer.finish();
  save_workload_specs(w, out_dir);
  directory.keep();
  return w;
}

}  // namespace

Workload synthesize_workload(const SynthOptions& options, const PublishedStats& target,
                             const std::string& out_dir, const SynthProgress& progress) {
  return write_synth_workload(
      plan_synth(options, target),
      fmt::format("synth profile {} seed {} ({} tables x batch {}, calibrated to {})",
                  options.profile, options.seed, options.num_tables, options.batch_size,
                  target.dataset),
      out_dir, progress);
}

Workload synthesize_from_specs(const Workload& specs, uint64_t seed, uint32_t index_bytes,
                               const std::string& out_dir, const SynthProgress& progress) {
  return write_synth_workload(
      plan_synth_from_specs(specs, seed, index_bytes),
      fmt::format("synth seed {} from the table specs {} ({} tables x batch {})", seed,
                  specs.source, specs.tables.size(), specs.batch_size),
      out_dir, progress);
}

}  // namespace embshard
