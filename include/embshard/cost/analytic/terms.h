// The analytic model's terms: what a shard's tables add up to (bytes moved,
// lookups, tables, sort passes, page walks) before the calibration's
// coefficients turn them into milliseconds, and the all-to-all formula.
//
// Compute: the fused operator moves bytes and pays per-lookup, per-table and
// per-call overheads. `embshard calibrate` fits the coefficients over the same
// terms the model predicts with, so the model and its calibration can never
// disagree on what a term means.
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
#include <span>
#include <type_traits>

#include "embshard/cost/analytic/calibration.h"
#include "embshard/cost/comm_model.h"
#include "embshard/cost/compute_model.h"

namespace embshard {

// One table of a shard as the analytic model sees it, at a given batch.
struct AnalyticTable {
  int64_t rows = 0;
  int dim = 0;
  double lookups = 0;        // pooling factor x batch
  double distinct_rows = 0;  // rows touched at least once in the batch
  DataType data_type = DataType::kFp32;  // rows read and updated at its bytes
};

// With distinct rows from estimate_distinct_rows (compute_model.h), assuming
// the ratio distinct / lookups holds at the model's batch too.
AnalyticTable analytic_table(const TableFeatures& t, int64_t batch_size);

// The linear terms of the model for one shard (one fused call), before they
// are multiplied by their coefficients. Forward terms are
// {1 call, tables, lookups, DRAM gather bytes, cached gather bytes}; backward
// terms are {1 call, tables, lookups, lookup-sort-passes, grad bytes, DRAM
// update bytes, cached update bytes, page-walk rows}. Page-walk rows: distinct
// rows x (1 - TLB entries / distinct pages the shard touches), where a table
// touches min(distinct rows, its bytes / kPageBytes) pages. The pooled output (batch x dim x 4
// bytes written) is charged at seq_gbps, measured directly, not fitted; so
// is the forward's conversion of rows stored as fp16, bf16, int8 or int4 to
// fp32 (per element and per row looked up, Calibration::fwd_convert_ns and
// fwd_convert_lookup_ns, fitted apart).
constexpr int kFwdTerms = 7;
constexpr int kBwdTerms = 8;
// 2048 L2 TLB entries x 4 KiB pages (x86 server cores); past it, rows spread
// over a table's pages each cost a page walk.
constexpr double kTlbReachBytes = 8.0 * (1 << 20);
constexpr double kPageBytes = 4096;
// Per stored type but fp32 (fp16, bf16, int8, int4: DataType - 1).
constexpr int kConvertedTypes = 4;
struct AnalyticTerms {
  double fwd[kFwdTerms] = {};
  double bwd[kBwdTerms] = {};
  double output_bytes = 0;
  double converted_elements[kConvertedTypes] = {};  // lookups x dim of each type
  double converted_lookups[kConvertedTypes] = {};   // lookups of each type
};
// What a shard's tables add up to. Every term is a function of these sums
// (and of the cache and the TLB reach), so the terms of a shard can be kept
// up to date one table at a time (the search's incremental state).
struct AnalyticSums {
  double tables = 0, lookups = 0, footprint_bytes = 0, pages = 0, distinct_rows = 0;
  double lookup_bytes = 0, generic_elements = 0, sort_lookup_passes = 0, output_bytes = 0;
  double update_bytes = 0;
  double grad_bytes = 0;  // fp32 gradients, one row a lookup (lookup_bytes: rows as stored)
  double converted_elements[kConvertedTypes] = {};
  double converted_lookups[kConvertedTypes] = {};
  void add(const AnalyticTable& t, int64_t batch_size);
};
// As a state vector: the fields in order (the struct is only doubles).
constexpr size_t kAnalyticSums = sizeof(AnalyticSums) / sizeof(double);
static_assert(std::is_trivially_copyable_v<AnalyticSums> && kAnalyticSums == 19);
AnalyticTerms analytic_terms(const AnalyticSums& sums, int64_t cache_bytes);
AnalyticTerms analytic_terms(std::span<const AnalyticTable> shard, int64_t batch_size,
                             int64_t cache_bytes);
double analytic_fwd_ms(const AnalyticTerms& terms, const Calibration& c);
double analytic_bwd_ms(const AnalyticTerms& terms, const Calibration& c);

// The all-to-all formula above; every output is finite and >= 0.
void analytic_comm_ms(const Calibration& c, int64_t batch_size,
                      std::span<const double> dim_sums, std::span<const double> delays_ms,
                      std::span<double> fwd_ms, std::span<double> bwd_ms);
// The formula's floor (CommModel::floor_ms): a device's busiest direction,
// max(send, receive), is smallest when its dim sum is total / devices, and
// the forward adds a delay >= 0 to the backward's time.
double analytic_comm_floor_ms(const Calibration& c, int64_t batch_size, double total_dims,
                              int devices);

// The collectives of row-wise and data-parallel pieces (comm_model.h), with
// the calibration's collective constants (those fitted at N ranks and batch B
// where it has them, else those fitted to every file, else the all-to-all's):
// the backward's latency alpha and bandwidth beta, the all-reduce's
// bandwidth beta_ar, and the forward's own latency alpha_f and bandwidths
// beta_i (index) and beta_rs (reduce-scatter), each the backward's where 0;
// N devices, B the batch, bytes_d = max(B/N rw_d 4 (N-1), B/N (sum rw - rw_d) 4):
//   index all-to-all (fwd): alpha_f + max(received_d, sent_d) / beta_i
//   reduce-scatter (fwd): (N-1) alpha_f + bytes_d / beta_rs
//   all-gather (bwd): (N-1) alpha + bytes_d / beta
//   all-reduce (bwd, every device): 2 (N-1) alpha + 2 (N-1)/N S / beta_ar
// Each term is 0 without its load; added to fwd_ms / bwd_ms.
void analytic_collective_ms(const Calibration& c, int64_t batch_size, const CollectiveLoad& load,
                            std::span<double> fwd_ms, std::span<double> bwd_ms);
}  // namespace embshard
