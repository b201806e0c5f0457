// Synthetic cost data with a known cost function, written through RecordFile
// in the `bench compute` / `bench comm` formats, for the cost model tests.
#pragma once

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "embshard/cost/cost_data.h"
#include "embshard/util/file.h"
#include "embshard/util/record_file.h"
#include "embshard/workload/table.h"
#include "embshard/cost/compute_model.h"
#include "embshard/cost/neural/features.h"
#include "embshard/cost/neural/mlp.h"
#include "embshard/cost/neural/model.h"

namespace embshard::testing {

// An MLP of the given layer sizes with N(0, 0.3) weights and biases, ReLU
// after every layer but the last (and the last too with `relu_last`).
inline Mlp random_mlp(const std::vector<int>& sizes, bool relu_last, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0, 0.3f);
  Mlp mlp;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    DenseLayer l;
    l.in = sizes[i];
    l.out = sizes[i + 1];
    l.relu = i + 2 < sizes.size() || relu_last;
    for (int k = 0; k < l.in * l.out; ++k) l.weight.push_back(n(rng));
    for (int k = 0; k < l.out; ++k) l.bias.push_back(n(rng));
    mlp.layers.push_back(l);
  }
  return mlp;
}

struct SynthTable {
  int64_t rows;
  double pooling;
  ReuseHistogram row_reuse{}, lookup_reuse{};
};

inline std::vector<SynthTable> synth_pool(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<SynthTable> pool;
  for (int i = 0; i < count; ++i) {
    SynthTable t;
    t.rows = static_cast<int64_t>(std::pow(10.0, 3 + 3 * u(rng)));
    t.pooling = 1 + 29 * u(rng);
    double rs = 0, ls = 0;
    for (int k = 0; k < kReuseBins; ++k) {
      rs += t.row_reuse[k] = u(rng) * std::exp(-0.6 * k);
      ls += t.lookup_reuse[k] = u(rng) * std::exp(-0.3 * k);
    }
    for (int k = 0; k < kReuseBins; ++k) t.row_reuse[k] /= rs, t.lookup_reuse[k] /= ls;
    pool.push_back(t);
  }
  return pool;
}

// The known cost function: a fixed overhead plus, per table, a*rows^0.3*dim*pooling.
inline double synth_cost_ms(const std::vector<std::pair<SynthTable, int>>& shard) {
  double ms = 0.05;
  for (const auto& [t, dim] : shard) ms += 2e-5 * std::pow(t.rows, 0.3) * dim * t.pooling;
  return ms;
}

inline nlohmann::json compute_header(int64_t batch) {
  return {{"format", "embshard-compute-costs"},
          {"version", kCostDataVersion},
          {"batch_size", batch},
          {"threads", 1},
          {"machine", {{"cpu", "synthetic"}}}};
}

// A file of "another machine": shards of 1..6 tables of a 30-table pool
// (dims 8-64), each costing ms_of(its tables, batch).
inline void write_machine_compute(
    const std::string& path, int64_t batch, int samples, uint64_t seed,
    const std::function<double(const std::vector<TableFeatures>&, int64_t)>& ms_of) {
  const auto pool = synth_pool(30, seed);
  std::mt19937_64 rng(seed);
  RecordFile out(path, compute_header(batch), {});
  for (int s = 0; s < samples; ++s) {
    std::vector<TableFeatures> tables;
    nlohmann::json records = nlohmann::json::array();
    for (int i = 0; i < 1 + s % 6; ++i) {
      const int id = static_cast<int>(rng() % pool.size());
      const int dim = 8 << (rng() % 4);
      tables.push_back({pool[id].rows, dim, pool[id].pooling, pool[id].row_reuse,
                        pool[id].lookup_reuse});
      records.push_back({{"table", id},
                         {"rows", pool[id].rows},
                         {"dim", dim},
                         {"pooling_factor", pool[id].pooling},
                         {"row_reuse_histogram", pool[id].row_reuse},
                         {"lookup_reuse_histogram", pool[id].lookup_reuse}});
    }
    out.append({{"sample", s}, {"tables", records}, {"ms", ms_of(tables, batch)}});
  }
}

// A copy of a compute-costs file whose records' first table is, in every
// third record, a row block and, in the next, a replica's batch slice (the
// rest stay whole); the figures stay as they were.
inline void mark_pieces(const std::string& in_path, const std::string& out_path) {
  std::ifstream in(in_path);
  std::ofstream out(out_path);
  std::string line;
  for (int k = -1; std::getline(in, line); ++k) {  // -1: the header
    nlohmann::json j = nlohmann::json::parse(line);
    if (k >= 0 && k % 3 == 0) j["tables"][0]["row_offset"] = 0;
    if (k >= 0 && k % 3 == 1) j["tables"][0]["batch_slice"] = {1, 2};
    out << j.dump() << "\n";
  }
}

// `samples` records of shards of 1..max_tables pool tables, with multiplicative noise.
inline void write_synth_compute(const std::string& path, int samples, uint64_t seed,
                                int pool_size = 40, int max_tables = 8, double noise = 0.01,
                                uint64_t pool_seed = 7) {
  const std::vector<SynthTable> pool = synth_pool(pool_size, pool_seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int dims[] = {4, 8, 16, 32, 64};
  RecordFile out(path, compute_header(512), {});
  for (int s = 0; s < samples; ++s) {
    const int n = 1 + static_cast<int>(rng() % max_tables);
    std::vector<std::pair<SynthTable, int>> shard;
    nlohmann::json tables = nlohmann::json::array();
    for (int i = 0; i < n; ++i) {
      const int id = static_cast<int>(rng() % pool.size());
      const int dim = dims[rng() % 5];
      shard.emplace_back(pool[id], dim);
      tables.push_back({{"table", id},
                        {"rows", pool[id].rows},
                        {"dim", dim},
                        {"pooling_factor", pool[id].pooling},
                        {"unique_rows", 1},
                        {"row_reuse_histogram", pool[id].row_reuse},
                        {"lookup_reuse_histogram", pool[id].lookup_reuse}});
    }
    const double ms = synth_cost_ms(shard) * (1 + noise * (2 * u(rng) - 1));
    out.append({{"sample", s},
                {"tables", tables},
                {"fwd_ms", ms / 3},
                {"bwd_ms", ms * 2 / 3},
                {"ms", ms}});
  }
}

// One `bench comm` record: a placement's dim sums and delays, and what each
// device's forward and backward took.
inline void append_comm_record(RecordFile& out, int sample, const std::vector<double>& dims,
                               const std::vector<double>& delays, const std::vector<double>& fwd,
                               const std::vector<double>& bwd) {
  out.append({{"sample", sample},
              {"dim_sums", dims},
              {"delays_ms", delays},
              {"fwd_ms", fwd},
              {"bwd_ms", bwd},
              {"num_tables", std::vector<int>(dims.size(), 1)}});
}

// Known comm costs: latency + bytes / bandwidth for bwd; fwd adds the wait for
// the slowest device.
inline void write_synth_comm(const std::string& path, int devices, int samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int64_t batch = 1024;
  RecordFile out(path,
                 {{"format", "embshard-comm-costs"},
                  {"version", kCostDataVersion},
                  {"num_devices", devices},
                  {"batch_size", batch},
                  {"machine", {{"cpu", "synthetic"}}}},
                 {});
  for (int s = 0; s < samples; ++s) {
    std::vector<double> dims(devices), delays(devices), fwd(devices), bwd(devices);
    double total = 0, max_delay = 0;
    for (int d = 0; d < devices; ++d) {
      dims[d] = std::floor(16 + 600 * u(rng));
      delays[d] = 3 * u(rng);
      total += dims[d];
    }
    const double min_delay = *std::min_element(delays.begin(), delays.end());
    for (double& v : delays) max_delay = std::max(max_delay, v -= min_delay);
    for (int d = 0; d < devices; ++d) {
      const double mb = 4.0 * batch / devices * (dims[d] * (devices - 1) + total - dims[d]) / 1e6;
      bwd[d] = 0.05 + 0.2 * mb;
      fwd[d] = bwd[d] + (max_delay - delays[d]);
    }
    append_comm_record(out, s, dims, delays, fwd, bwd);
  }
}

// Rewrites record k (0-based, after the header) of a compute or comm file.
inline void edit_records(const std::string& path,
                         const std::function<void(int, nlohmann::json&)>& edit) {
  const std::string text = read_file(path);
  std::string out;
  int line = 0;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1, ++line) {
    if (line == 0) {
      out += text.substr(at, nl - at) + "\n";
      continue;
    }
    auto r = nlohmann::json::parse(text.substr(at, nl - at));
    edit(line - 1, r);
    out += r.dump() + "\n";
  }
  write_file_atomic(path, out);
}

// A neural model with random networks (compute, and forward and backward
// communication) over the real feature sets.
inline NeuralModel random_neural_model(uint64_t seed, bool data_type_feature = true) {
  std::mt19937_64 rng(seed);
  NeuralModel m;
  m.compute.data_type_feature = data_type_feature;
  m.batch_size = m.max_batch_size = 512;
  m.comm_batch_size = m.comm_max_batch_size = 1024;
  const int nf = m.compute.inputs().size();
  m.compute.features.mean.assign(nf, 0.5f);
  m.compute.features.scale.assign(nf, 0.7f);
  m.compute.table = random_mlp({nf, 16, 8}, true, rng);
  m.compute.head = random_mlp({8, 16, 1}, false, rng);
  m.compute.target_mean = -1;
  m.compute.target_std = 0.8;
  m.has_comm = true;
  for (auto* net : {&m.comm_fwd, &m.comm_bwd}) {
    const int n = static_cast<int>(net == &m.comm_fwd ? comm_fwd_feature_names().size()
                                                      : comm_bwd_feature_names().size());
    net->features.mean.assign(n, 0.1f);
    net->features.scale.assign(n, 0.5f);
    net->mlp = random_mlp({n, 12, 1}, false, rng);
  }
  m.comm_max_delay_ms = 2;
  return m;
}

// A table whose every row is accessed once: distinct rows = min(lookups, rows).
inline TableFeatures uniform_table(int64_t rows, int dim, double pooling) {
  TableFeatures t;
  t.rows = rows;
  t.dim = dim;
  t.pooling_factor = pooling;
  t.row_reuse[0] = 1;
  t.lookup_reuse[0] = 1;
  return t;
}

}  // namespace embshard::testing
