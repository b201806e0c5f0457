// A table as the cost models see it, and what its histograms imply.
#include <algorithm>
#include <cmath>

#include "embshard/cost/compute_model.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

// Mean access count of a row in reuse bin k: bin 0 is exactly 1, bin k in
// (2^(k-1), 2^k] -> about 1.5 x 2^(k-1); the open last bin likewise.
double bin_mean_count(int k) {
  if (k == 0) return 1.0;
  return 1.5 * std::ldexp(1.0, k - 1);
}

}  // namespace

TableFeatures table_features(const TableSpec& spec, int dim) {
  ES_CHECK(dim > 0, "table_features: table '{}' at dim {}, must be positive", spec.name, dim);
  TableFeatures f;
  f.rows = spec.rows;
  f.dim = dim;
  f.pooling_factor = spec.pooling_factor;
  f.row_reuse = spec.row_reuse;
  f.lookup_reuse = spec.lookup_reuse;
  f.data_type = spec.data_type;
  return f;
}

double estimate_distinct_rows(const TableFeatures& t, double lookups) {
  if (lookups <= 0 || t.rows <= 0) return 0;
  double distinct = 0;
  if (t.row_reuse[0] > 1e-9 && t.lookup_reuse[0] > 0) {
    distinct = lookups * t.lookup_reuse[0] / t.row_reuse[0];
  } else {
    // No row accessed once (or no histogram): lookups_k / mean count of bin k.
    double lookup_total = 0, rows_per_lookup = 0;
    for (int k = 0; k < kReuseBins; ++k) {
      lookup_total += t.lookup_reuse[k];
      rows_per_lookup += t.lookup_reuse[k] / bin_mean_count(k);
    }
    // No histogram at all: uniform access, the expected number of distinct rows.
    distinct = lookup_total > 0
                   ? lookups * rows_per_lookup / lookup_total
                   : static_cast<double>(t.rows) * -std::expm1(-lookups / t.rows);
  }
  return std::clamp(distinct, std::min(1.0, lookups),
                    std::min(lookups, static_cast<double>(t.rows)));
}

}  // namespace embshard
