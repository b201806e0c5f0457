// The analytic model's calibration: the fitted coefficients of its compute
// terms and its all-to-all constants, and the file that holds them.
//
// `embshard calibrate` fits the coefficients (analytic/calibrate.h); the
// terms they multiply are in analytic/terms.h; the model in analytic/model.h.
// See docs/cost_models.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace embshard {

constexpr const char* kCalibrationFormat = "embshard-analytic-calibration";
constexpr int kCalibrationVersion = 1;
// A shared-memory MPI all-to-all on one host takes tens of microseconds for
// tiny messages (Open MPI, 2-8 ranks); used only when no comm data is given.
constexpr double kDefaultCommLatencyUs = 30.0;

// Every coefficient carries its unit in its name. Bandwidths are in GB/s
// (1e9 bytes / s); a term whose fitted coefficient is zero is stored as
// kUnboundedGbps ("this term costs nothing measurable here").
constexpr double kUnboundedGbps = 1e6;

struct Calibration {
  std::string machine_cpu;
  int threads = 1;
  // What the probes were timed on, e.g. "cpu (1 thread, thread CPU time)"
  // (older files: the wall clock, "cpu (N threads)").
  std::string executor = "cpu (1 thread)";
  int64_t batch_size = 4096;      // the batch the probes ran at (the model's default)
  int64_t cache_bytes = 0;        // effective last-level cache (fitted from the probes)
  // forward
  double fwd_call_us = 0;         // per fused call
  double fwd_per_table_us = 0;    // per table of the call
  double fwd_per_lookup_ns = 0;
  double dram_gather_gbps = 0;    // first touch of a row that is not cached
  double cache_gather_gbps = 0;   // rows that are cached (reused, or small tables)
  double seq_gbps = 0;            // memcpy-like streaming (pooled output writes)
  // Dims without a specialised kernel (not 8/16/32/64/128) accumulate in
  // memory instead of registers: a cost per lookup and per element of the row.
  double generic_dim_ns_per_element = 0;
  // Distinct rows of tables far larger than the TLB's reach pay a page walk
  // (often itself a DRAM miss) on first touch, whatever their dim.
  double fwd_page_walk_ns = 0;
  double bwd_page_walk_ns = 0;
  // The forward's conversion to fp32 of rows stored as fp16, bf16, int8,
  // int4 (in that order), beyond their bytes: per element and per row looked
  // up (a quantized row's scale and bias). calibrate fits them to
  // forward-only probes of each type (0: files from before them).
  std::array<double, 4> fwd_convert_ns = {};
  std::array<double, 4> fwd_convert_lookup_ns = {};
  // backward + update
  double bwd_call_us = 0;
  double bwd_per_table_us = 0;
  double bwd_per_lookup_ns = 0;
  double sort_ns_per_lookup_pass = 0;  // radix sort: per lookup and per 11-bit pass
  double grad_read_gbps = 0;           // gradient rows read, once per lookup
  double dram_update_gbps = 0;         // distinct rows read + written, not cached
  double cache_update_gbps = 0;        // distinct rows read + written, cached
  // communication
  double comm_latency_us = kDefaultCommLatencyUs;
  double comm_gbps = 0;
  std::string comm_source = "default";  // "default" or the comm data file
  // The row-wise and data-parallel collectives (terms.h): latency, bandwidth
  // and the all-reduce's bandwidth, fitted to `bench comm --collectives`
  // files; 0 (and files from before them): the all-to-all's.
  double collective_latency_us = 0;
  double collective_gbps = 0;
  double allreduce_gbps = 0;
  // The forward's own: its steps' latency and the bandwidths of the index
  // all-to-all and the reduce-scatter (measured, the forward is slower than
  // one latency and bandwidth for both directions makes it: 9-25% in the
  // median, docs/sharding_types.md). 0 (and files from before them): as the
  // backward's collective_latency_us and collective_gbps.
  double collective_fwd_latency_us = 0;
  double index_gbps = 0;
  double reduce_scatter_gbps = 0;
  std::string collective_source;  // the files they were fitted to ("": none)
  // The same six fitted to the files of each rank count and batch alone
  // (ascending): oversubscribed ranks wait for a core in every step, so 4 and
  // 8 ranks on 2 cores do not share one latency, and each (ranks, batch) has
  // its own reference exchange, the scale of its files. Others use the
  // fields above.
  struct RankCollectives {
    int ranks = 0;
    int64_t batch_size = 0;
    double latency_us = 0, gbps = 0, allreduce_gbps = 0;
    double fwd_latency_us = 0, index_gbps = 0, reduce_scatter_gbps = 0;
  };
  std::vector<RankCollectives> collectives_by_ranks;
  // how good the fit was (relative RMS error over the probes, in percent)
  double fwd_fit_rms_pct = 0, bwd_fit_rms_pct = 0;
  double calibration_s = 0;
};

nlohmann::json calibration_to_json(const Calibration& c);
// Throws Error naming `context` (the file) and the field when a field is
// missing, not a finite positive (or non-negative) number, or the format or
// version is wrong.
Calibration calibration_from_json(const nlohmann::json& j, const std::string& context);
void save_calibration(const Calibration& c, const std::string& path);  // atomic
Calibration load_calibration(const std::string& path);

// A model set's all-to-all constants where one device cannot measure an
// all-to-all (a single GPU): {"format": "embshard-comm-constants",
// "version": 1, "latency_us", "gbps", "source": why these numbers}. Read into
// a Calibration whose comm fields alone are set (its compute fields are not
// a calibration and must not be used). Errors name the file and field.
constexpr const char* kCommConstantsFormat = "embshard-comm-constants";
Calibration load_comm_constants(const std::string& path);

}  // namespace embshard
