// Compute models: what one device's fused embedding work costs.
//
// A ComputeModel predicts the fused forward + backward + update of a set of
// tables on one device. Tables are registered once with add_table() and named
// by id afterwards, so that a model can pre-compute each table's share of the
// work: NeuroShard's compute model is per-table MLP -> sum -> MLP, so the
// per-table part is computed once per table, not once per shard.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "embshard/workload/table.h"

namespace embshard {

// One table (or a piece of one) as the cost models see it.
struct TableFeatures {
  int64_t rows = 0;
  int dim = 0;
  double pooling_factor = 0;
  ReuseHistogram row_reuse{};
  ReuseHistogram lookup_reuse{};
  DataType data_type = DataType::kFp32;  // what its weights are stored as
  // The table's index in the workload it came from, or -1 when unknown. Only
  // the measured (executor-backed) model needs it, to find the table's trace;
  // without it that model matches tables by rows, pooling factor and reuse.
  int source_table = -1;
  // A piece of that table: its first row (a row shard's rows [offset, offset +
  // rows)), and for a replica the slice of the batch it serves (slice of
  // slices). The learned and analytic models do not read them (a piece's
  // features are its own); the measured model executes the piece's own
  // lookups, bucketized from the trace, and `validate` groups records by them.
  int64_t source_row_offset = 0;
  bool row_piece = false;  // rows [source_row_offset, + rows) of the source, not all of it
  int batch_slice = 0, batch_slices = 1;
};
TableFeatures table_features(const TableSpec& spec, int dim);

// Distinct rows touched by `lookups` lookups of a table with these features:
// the one estimate every cost model uses. Bin 0 of the histograms holds rows
// accessed exactly once, so rows_in_bin0 = lookups_in_bin0, i.e. distinct =
// lookups * lookup_reuse[0] / row_reuse[0]: exact at the batch the histograms
// were taken at. Without rows accessed once, the bins' mean counts stand in;
// without histograms, uniform access. At most min(lookups, rows).
double estimate_distinct_rows(const TableFeatures& t, double lookups);

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  virtual std::string name() const = 0;
  // The batch size the predicted milliseconds are for.
  virtual int64_t batch_size() const = 0;

  // Registers a table; returns its id (0, 1, 2, ... in order of registration;
  // a model may return an earlier id for features it already holds).
  virtual int add_table(const TableFeatures& table) = 0;
  // Fused forward + backward + update of the given tables on one device, ms.
  virtual double compute_ms(std::span<const int> table_ids) const = 0;

  // Incremental costing, for the search's inner loop: a set of tables summed
  // up in state_size() numbers (all zero for the empty set), extended one
  // table at a time, so that costing "this device plus one table" does not
  // depend on how many tables the device holds. For every set of ids,
  // state_ms(the state after add_to_state of each id) == compute_ms(ids).
  // A model whose cost is not a function of such a sum keeps state_size() 0
  // and the search calls compute_ms instead.
  virtual size_t state_size() const { return 0; }
  virtual void add_to_state(int table_id, std::span<double> state) const;
  virtual double state_ms(std::span<const double> state) const;

  // How `table` lies far from the tables the model was fitted on ("pooling
  // factor 2400: 4.6 standard deviations above the training tables' mean,
  // on a log scale"), where its figure is an extrapolation; empty: it does
  // not, or the model cannot tell.
  virtual std::string far_from_training(const TableFeatures&) const { return {}; }

  // For a model that measures (the measured model): true starts a fresh
  // pass, in which a set of tables costs a new measurement of its own, taken
  // the first time the pass asks for the set; false returns to the first
  // measurements (the default). A model that predicts ignores it.
  virtual void set_fresh_pass(bool /*fresh*/) {}
};

}  // namespace embshard
