// The terms of the analytic model: what one fused call moves and how often
// it pays each overhead. Shared by the model and its calibration fit.
#include <algorithm>
#include <array>
#include <cmath>

#include "embshard/cost/analytic/terms.h"

#include "embshard/measure/alltoall.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// The executor's radix sort (kernel/tbe_backward.cpp) makes ceil(bits / 11)
// passes over a table's keys, where 2^bits >= rows; none for one row.
int sort_passes(int64_t rows) {
  int bits = 0;
  while (bits < 31 && (int64_t{1} << bits) < rows) ++bits;
  return (bits + 10) / 11;
}

// The forward kernel has register-accumulator versions for these dims only
// (kernel/tbe.cpp, pool_bags_dispatch).
bool specialised_dim(int dim) {
  return dim == 8 || dim == 16 || dim == 32 || dim == 64 || dim == 128;
}

}  // namespace

AnalyticTable analytic_table(const TableFeatures& t, int64_t batch_size) {
  ES_CHECK(t.rows > 0 && t.dim > 0 && std::isfinite(t.pooling_factor) && t.pooling_factor >= 0,
           "analytic model: table with rows {}, dim {}, pooling factor {} is invalid", t.rows,
           t.dim, t.pooling_factor);
  AnalyticTable a;
  a.rows = t.rows;
  a.dim = t.dim;
  a.lookups = t.pooling_factor * static_cast<double>(batch_size);
  a.distinct_rows = estimate_distinct_rows(t, a.lookups);
  a.data_type = t.data_type;
  return a;
}

void AnalyticSums::add(const AnalyticTable& t, int64_t batch_size) {
  // Rows are read and updated at their stored bytes; the pooled output and
  // the state are fp32.
  const double row_bytes = static_cast<double>(data_type_row_bytes(t.data_type, t.dim));
  const double output_row_bytes = t.dim * 4.0;
  tables += 1;
  lookups += t.lookups;
  footprint_bytes += t.distinct_rows * row_bytes;
  pages += std::min(t.distinct_rows, t.rows * row_bytes / kPageBytes);
  distinct_rows += t.distinct_rows;
  lookup_bytes += t.lookups * row_bytes;
  grad_bytes += t.lookups * output_row_bytes;
  if (t.data_type != DataType::kFp32) {
    converted_elements[static_cast<int>(t.data_type) - 1] += t.lookups * t.dim;
    converted_lookups[static_cast<int>(t.data_type) - 1] += t.lookups;
  }
  if (!specialised_dim(t.dim)) generic_elements += t.lookups * t.dim;
  sort_lookup_passes += t.lookups * sort_passes(t.rows);
  output_bytes += static_cast<double>(batch_size) * output_row_bytes;
  // Update: each distinct row (and its 4-byte momentum) read and written once.
  update_bytes += 2.0 * t.distinct_rows * (row_bytes + 4.0);
}

AnalyticTerms analytic_terms(const AnalyticSums& s, int64_t cache_bytes) {
  // The benchmark (like a training step's forward then backward) touches the
  // same distinct rows in both passes; of that footprint a share cache/footprint
  // is still cached when it is touched again (random access under LRU), the
  // rest comes from DRAM. Repeated accesses within a batch always hit.
  const double cold =
      s.footprint_bytes > 0 ? std::max(0.0, 1.0 - cache_bytes / s.footprint_bytes) : 0.0;
  // The TLB is shared by the shard's tables just as the cache is: of the
  // distinct pages the call touches, those past the TLB's reach cost a walk.
  const double walk = s.pages > 0 ? std::max(0.0, 1.0 - kTlbReachBytes / kPageBytes / s.pages) : 0.0;
  AnalyticTerms terms;
  terms.fwd[0] = terms.bwd[0] = s.tables > 0 ? 1 : 0;
  terms.fwd[1] = terms.bwd[1] = s.tables;
  terms.fwd[2] = terms.bwd[2] = s.lookups;
  terms.fwd[3] = s.footprint_bytes * cold;
  terms.fwd[4] = s.lookup_bytes - s.footprint_bytes * cold;
  terms.fwd[5] = s.generic_elements;
  terms.fwd[6] = terms.bwd[7] = s.distinct_rows * walk;
  terms.output_bytes = s.output_bytes;
  std::copy(std::begin(s.converted_elements), std::end(s.converted_elements),
            terms.converted_elements);
  std::copy(std::begin(s.converted_lookups), std::end(s.converted_lookups),
            terms.converted_lookups);
  terms.bwd[3] = s.sort_lookup_passes;
  terms.bwd[4] = s.grad_bytes;
  terms.bwd[5] = s.update_bytes * cold;
  terms.bwd[6] = s.update_bytes * (1.0 - cold);
  return terms;
}

AnalyticTerms analytic_terms(std::span<const AnalyticTable> shard, int64_t batch_size,
                             int64_t cache_bytes) {
  AnalyticSums sums;
  for (const AnalyticTable& t : shard) sums.add(t, batch_size);
  return analytic_terms(sums, cache_bytes);
}

namespace {
double ms_per_byte(double gbps) { return gbps > 0 ? 1e-6 / gbps : 0.0; }
template <size_t N>
double dot(const double* terms, const std::array<double, N>& coef) {
  double sum = 0;
  for (size_t i = 0; i < coef.size(); ++i) sum += terms[i] * coef[i];
  return sum;
}

// Coefficients (ms per unit of each term) of a calibration, in term order.
std::array<double, kFwdTerms> fwd_coefficients_ms(const Calibration& c) {
  return {c.fwd_call_us * 1e-3, c.fwd_per_table_us * 1e-3, c.fwd_per_lookup_ns * 1e-6,
          ms_per_byte(c.dram_gather_gbps), ms_per_byte(c.cache_gather_gbps),
          c.generic_dim_ns_per_element * 1e-6, c.fwd_page_walk_ns * 1e-6};
}

std::array<double, kBwdTerms> bwd_coefficients_ms(const Calibration& c) {
  return {c.bwd_call_us * 1e-3,           c.bwd_per_table_us * 1e-3,
          c.bwd_per_lookup_ns * 1e-6,     c.sort_ns_per_lookup_pass * 1e-6,
          ms_per_byte(c.grad_read_gbps),  ms_per_byte(c.dram_update_gbps),
          ms_per_byte(c.cache_update_gbps), c.bwd_page_walk_ns * 1e-6};
}
}  // namespace

double analytic_fwd_ms(const AnalyticTerms& terms, const Calibration& c) {
  double convert_ms = 0;
  for (int i = 0; i < kConvertedTypes; ++i) {
    convert_ms += (terms.converted_elements[i] * c.fwd_convert_ns[i] +
                   terms.converted_lookups[i] * c.fwd_convert_lookup_ns[i]) *
                  1e-6;
  }
  return dot(terms.fwd, fwd_coefficients_ms(c)) + terms.output_bytes * ms_per_byte(c.seq_gbps) +
         convert_ms;
}

double analytic_bwd_ms(const AnalyticTerms& terms, const Calibration& c) {
  return dot(terms.bwd, bwd_coefficients_ms(c));
}

void analytic_comm_ms(const Calibration& c, int64_t batch_size,
                      std::span<const double> dim_sums, std::span<const double> delays_ms,
                      std::span<double> fwd_ms, std::span<double> bwd_ms) {
  const size_t n = dim_sums.size();
  ES_CHECK(delays_ms.size() == n && (fwd_ms.empty() || fwd_ms.size() == n) &&
               (bwd_ms.empty() || bwd_ms.size() == n),
           "comm_ms: {} dim sums but {} delays, {} / {} outputs", n, delays_ms.size(),
           fwd_ms.size(), bwd_ms.size());
  if (n == 0) return;
  double total_dim = 0, max_delay = 0;
  for (size_t d = 0; d < n; ++d) {
    ES_CHECK(std::isfinite(dim_sums[d]) && dim_sums[d] >= 0 && std::isfinite(delays_ms[d]),
             "comm_ms: device {} has dim sum {} and delay {} ms", d, dim_sums[d], delays_ms[d]);
    total_dim += dim_sums[d];
    max_delay = std::max(max_delay, delays_ms[d]);
  }
  for (size_t d = 0; d < n; ++d) {
    const AllToAllBytes bytes =
        alltoall_bytes(dim_sums[d], total_dim, static_cast<double>(n), static_cast<double>(batch_size));
    const double comm =
        n > 1 ? c.comm_latency_us * 1e-3 + bytes.busiest() * ms_per_byte(c.comm_gbps) : 0.0;
    if (!bwd_ms.empty()) bwd_ms[d] = comm;
    if (!fwd_ms.empty()) fwd_ms[d] = comm + std::max(0.0, max_delay - delays_ms[d]);
  }
}

double analytic_comm_floor_ms(const Calibration& c, int64_t batch_size, double total_dims,
                              int devices) {
  if (devices <= 1) return 0.0;
  const double n = static_cast<double>(devices);
  const AllToAllBytes even = alltoall_bytes(total_dims / n, total_dims, n, static_cast<double>(batch_size));
  return 2 * (c.comm_latency_us * 1e-3 + even.busiest() * ms_per_byte(c.comm_gbps));
}

void analytic_collective_ms(const Calibration& c, int64_t batch_size, const CollectiveLoad& load,
                            std::span<double> fwd_ms, std::span<double> bwd_ms) {
  const size_t n = fwd_ms.size();
  ES_CHECK(bwd_ms.size() == n && load.rw_dim_sums.size() == n &&
               load.index_recv_bytes.size() == n && load.index_send_bytes.size() == n,
           "collective_ms: {} devices but loads of {} / {} / {} and {} backward outputs", n,
           load.rw_dim_sums.size(), load.index_recv_bytes.size(), load.index_send_bytes.size(),
           bwd_ms.size());
  if (n <= 1) return;  // one device exchanges nothing
  Calibration::RankCollectives k{.latency_us = c.collective_latency_us,
                                 .gbps = c.collective_gbps,
                                 .allreduce_gbps = c.allreduce_gbps,
                                 .fwd_latency_us = c.collective_fwd_latency_us,
                                 .index_gbps = c.index_gbps,
                                 .reduce_scatter_gbps = c.reduce_scatter_gbps};
  for (const Calibration::RankCollectives& r : c.collectives_by_ranks) {
    if (r.ranks == static_cast<int>(n) && r.batch_size == batch_size) k = r;
  }
  // 0: the backward's, whose 0 is the all-to-all's.
  const double alpha = (k.latency_us > 0 ? k.latency_us : c.comm_latency_us) * 1e-3;
  const double fwd_alpha = k.fwd_latency_us > 0 ? k.fwd_latency_us * 1e-3 : alpha;
  const double per_byte = ms_per_byte(k.gbps > 0 ? k.gbps : c.comm_gbps);
  const auto or_backward = [&](double gbps) { return gbps > 0 ? ms_per_byte(gbps) : per_byte; };
  const double allreduce_per_byte = or_backward(k.allreduce_gbps);
  const double index_per_byte = or_backward(k.index_gbps);
  const double reduce_scatter_per_byte = or_backward(k.reduce_scatter_gbps);
  const double devices = static_cast<double>(n);
  double total_rw = 0, total_index = 0;
  for (size_t d = 0; d < n; ++d) {
    ES_CHECK(load.rw_dim_sums[d] >= 0 && load.index_recv_bytes[d] >= 0 &&
                 load.index_send_bytes[d] >= 0,
             "collective_ms: device {} has a negative load", d);
    total_rw += load.rw_dim_sums[d];
    total_index += load.index_recv_bytes[d];
  }
  ES_CHECK(std::isfinite(load.allreduce_bytes) && load.allreduce_bytes >= 0,
           "collective_ms: all-reduce of {} bytes", load.allreduce_bytes);
  // Ring all-reduce: a reduce-scatter then an all-gather, 2 (N-1) steps of S / N.
  const double allreduce =
      load.allreduce_bytes > 0
          ? 2 * (devices - 1) * alpha +
                2 * (devices - 1) / devices * load.allreduce_bytes * allreduce_per_byte
          : 0.0;
  for (size_t d = 0; d < n; ++d) {
    double fwd = 0, bwd = allreduce;
    if (total_index > 0) {
      fwd += fwd_alpha +
             std::max(load.index_recv_bytes[d], load.index_send_bytes[d]) * index_per_byte;
    }
    if (total_rw > 0) {
      // A ring reduce-scatter of the shard's partial sums (global batch x its
      // columns) sends N-1 slices of B/N rows and receives the others' slices
      // for its own samples: the all-to-all's byte counts, in N-1 steps. The
      // all-gather of the gradients moves the same bytes back.
      const AllToAllBytes bytes = alltoall_bytes(load.rw_dim_sums[d], total_rw, devices,
                                                 static_cast<double>(batch_size));
      fwd += (devices - 1) * fwd_alpha + bytes.busiest() * reduce_scatter_per_byte;
      bwd += (devices - 1) * alpha + bytes.busiest() * per_byte;
    }
    fwd_ms[d] += fwd;
    bwd_ms[d] += bwd;
  }
}

}  // namespace embshard
