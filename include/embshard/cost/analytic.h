// The analytic (bandwidth / roofline) cost model and its calibration.
//
// Compute: the fused operator moves bytes and pays per-lookup, per-table and
// per-call overheads. `embshard calibrate` times a handful of probe shards on
// the real executor (tbe_forward / tbe_backward_update) and fits the
// coefficients below by non-negative least squares over the same terms the
// model predicts with (analytic_terms), so the model and its calibration can
// never disagree on what a term means. See docs/cost_models.md.
//
// Communication: all-to-all as latency + bytes / bandwidth, per device
//   comm_d = alpha + max(sent_d, received_d) / beta
//   fwd_d  = comm_d + (max_p delay_p - delay_d)   (the forward waits for stragglers)
//   bwd_d  = comm_d
// with alpha, beta fitted from a `bench comm` file (calibrate --comm), or else
// beta = local memcpy bandwidth and alpha = kDefaultCommLatencyUs.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "embshard/cost/cost_model.h"

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

// One table of a shard as the analytic model sees it, at a given batch.
struct AnalyticTable {
  int64_t rows = 0;
  int dim = 0;
  double lookups = 0;        // pooling factor x batch
  double distinct_rows = 0;  // rows touched at least once in the batch
};

// Distinct rows touched by `lookups` lookups of a table with these features.
// Bin 0 of the histograms holds rows accessed exactly once, so
// rows_in_bin0 = lookups_in_bin0, i.e. distinct = lookups * lookup_reuse[0] /
// row_reuse[0]: exact at the batch the histograms were taken at. Other cases
// fall back to the bins' mean counts. Assumption: the ratio distinct/lookups
// holds at the model's batch too (it falls slowly as the batch grows).
double estimate_distinct_rows(const TableFeatures& t, double lookups);
AnalyticTable analytic_table(const TableFeatures& t, int64_t batch_size);

// The linear terms of the model for one shard (one fused call), before they
// are multiplied by their coefficients. Forward terms are
// {1 call, tables, lookups, DRAM gather bytes, cached gather bytes}; backward
// terms are {1 call, tables, lookups, lookup-sort-passes, grad bytes, DRAM
// update bytes, cached update bytes, page-walk rows}. Page-walk rows: distinct
// rows x (1 - TLB entries / distinct pages the shard touches), where a table
// touches min(distinct rows, its bytes / kPageBytes) pages. The pooled output (batch x dim x 4
// bytes written) is charged at seq_gbps, measured directly, not fitted.
constexpr int kFwdTerms = 7;
constexpr int kBwdTerms = 8;
// 2048 L2 TLB entries x 4 KiB pages (x86 server cores); past it, rows spread
// over a table's pages each cost a page walk.
constexpr double kTlbReachBytes = 8.0 * (1 << 20);
constexpr double kPageBytes = 4096;
struct AnalyticTerms {
  double fwd[kFwdTerms] = {};
  double bwd[kBwdTerms] = {};
  double output_bytes = 0;
};
// What a shard's tables add up to. Every term is a function of these sums
// (and of the cache and the TLB reach), so the terms of a shard can be kept
// up to date one table at a time (the search's incremental state).
struct AnalyticSums {
  double tables = 0, lookups = 0, footprint_bytes = 0, pages = 0, distinct_rows = 0;
  double lookup_bytes = 0, generic_elements = 0, sort_lookup_passes = 0, output_bytes = 0;
  double update_bytes = 0;
  void add(const AnalyticTable& t, int64_t batch_size);
};
// As a state vector: the fields in order (the struct is only doubles).
constexpr size_t kAnalyticSums = sizeof(AnalyticSums) / sizeof(double);
static_assert(std::is_trivially_copyable_v<AnalyticSums> && kAnalyticSums == 10);
AnalyticTerms analytic_terms(const AnalyticSums& sums, int64_t cache_bytes);
AnalyticTerms analytic_terms(std::span<const AnalyticTable> shard, int64_t batch_size,
                             int64_t cache_bytes);
// Coefficients (ms per unit of each term) of a calibration, in term order.
std::array<double, kFwdTerms> fwd_coefficients_ms(const Calibration& c);
std::array<double, kBwdTerms> bwd_coefficients_ms(const Calibration& c);
double analytic_fwd_ms(const AnalyticTerms& terms, const Calibration& c);
double analytic_bwd_ms(const AnalyticTerms& terms, const Calibration& c);

// The all-to-all formula above; every output is finite and >= 0.
void analytic_comm_ms(const Calibration& c, int64_t batch_size,
                      std::span<const double> dim_sums, std::span<const double> delays_ms,
                      std::span<double> fwd_ms, std::span<double> bwd_ms);

// The analytic model from a calibration already in memory (batch 0: the
// calibration's batch). make_analytic_cost_model(options) loads the file.
std::unique_ptr<CostModel> make_analytic_cost_model(const Calibration& c, int64_t batch_size);

struct CalibrateOptions {
  std::string out_path = "models/analytic.json";
  std::string comm_path;  // a `bench comm` file to fit alpha/beta from ("" = defaults)
  int threads = 1;
  int64_t batch_size = 4096;
  bool quick = false;     // smaller probes and fewer repeats (tests)
  uint64_t seed = 1;
};

// Measures the probes, fits, and returns the calibration (progress on stderr).
Calibration run_calibration(const CalibrateOptions& options);
// Fits comm_latency_us / comm_gbps from a `bench comm` file into `c`.
void fit_comm_from_file(const std::string& path, Calibration& c);

// The analytic model's predictions for every record of a `bench compute`
// file (at the file's batch), with the measured totals beside them. Records
// whose tables lack a field are an Error naming the file and record.
struct ComputeCheck {
  std::vector<double> predicted_ms, measured_ms;
  int64_t batch_size = 0;
};
ComputeCheck predict_compute_file(const Calibration& c, const std::string& path);

// Non-negative least squares min |A x - b|, A row-major [rows x cols], small
// cols (exact: every active set is tried). Used by the calibration fits.
std::vector<double> nnls(const std::vector<double>& a, const std::vector<double>& b, int cols);

}  // namespace embshard
