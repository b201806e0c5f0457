#include "kernel/tbe_common.h"

#include <fmt/format.h>

namespace embshard {

int64_t FusedBatch::total_dim() const {
  int64_t total = 0;
  for (const TableBatch& t : tables) total += t.dim;
  return total;
}

int64_t FusedBatch::column_offset(size_t table) const {
  int64_t offset = 0;
  for (size_t t = 0; t < table && t < tables.size(); ++t) offset += tables[t].dim;
  return offset;
}

std::string Status::message() const {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kIndexOutOfRange:
      return fmt::format("index out of range: table {}, position {}, value {}{}", table,
                         position, value, detail.empty() ? "" : " (" + detail + ")");
    case Code::kInvalidArgument:
      break;
  }
  std::string where = table >= 0 ? fmt::format(" in table {}", table) : "";
  return fmt::format("invalid argument{}: {} (value {})", where, detail, value);
}

namespace detail {

Status index_out_of_range(int table, int64_t position, int64_t value, int64_t rows) {
  Status s;
  s.code = Status::Code::kIndexOutOfRange;
  s.table = table;
  s.position = position;
  s.value = value;
  s.detail = fmt::format("valid indices are [0, {})", rows);
  return s;
}

Status check_indices(const FusedBatch& batch, int64_t* lookups) {
  int64_t count = 0;
  for (int t = 0; t < static_cast<int>(batch.tables.size()); ++t) {
    const TableBatch& tb = batch.tables[t];
    const int64_t nnz = tb.offsets[batch.batch_size];
    for (int64_t i = 0; i < nnz; ++i) {
      if (!index_in_range(tb.indices[i], tb.rows)) {
        return index_out_of_range(t, i, tb.indices[i], tb.rows);
      }
    }
    count += nnz;
  }
  if (lookups != nullptr) *lookups = count;
  return {};
}

namespace {

Status check_offsets(const TableBatch& t, int table, int64_t batch_size) {
  if (t.offsets == nullptr) return invalid_argument(table, 0, "offsets is null");
  if (t.offsets[0] != 0) return invalid_argument(table, t.offsets[0], "offsets[0] must be 0");
  for (int64_t b = 0; b < batch_size; ++b) {
    if (t.offsets[b + 1] < t.offsets[b]) {
      return invalid_argument(table, t.offsets[b + 1],
                              fmt::format("offsets decrease at bag {}", b + 1));
    }
  }
  const int64_t nnz = t.offsets[batch_size];
  if (nnz >= kMaxTableIndices) {
    return invalid_argument(table, nnz, "more than 2^32 indices in one table");
  }
  if (nnz > 0 && t.indices == nullptr) return invalid_argument(table, nnz, "indices is null");
  return {};
}

Status check_table(const FusedBatch& batch, int table, const OptimizerConfig* optimizer) {
  const TableBatch& t = batch.tables[table];
  if (t.dim < 1 || t.dim > kMaxDim) return invalid_argument(table, t.dim, "dim must be 1..1024");
  if (t.rows < 0 || t.rows >= kMaxTableRows) {
    return invalid_argument(table, t.rows, "rows must be in [0, 2^31)");
  }
  if (t.rows > 0 && t.type == DataType::kFp32 && t.weights == nullptr) {
    return invalid_argument(table, 0, "weights is null");
  }
  if (t.rows > 0 && t.type != DataType::kFp32 && t.packed == nullptr) {
    return invalid_argument(table, 0,
                            "packed weights are null (a " + data_type_name(t.type) + " table)");
  }
  if (optimizer != nullptr && !data_type_trains(t.type)) {
    return invalid_argument(table, static_cast<int64_t>(t.type),
                            data_type_name(t.type) + " tables are forward-only");
  }
  if (t.per_sample_weights != nullptr && batch.pooling == PoolingMode::kMean) {
    return invalid_argument(table, 0, "per_sample_weights need sum pooling");
  }
  if (optimizer != nullptr && optimizer->type == OptimizerType::kRowWiseAdagrad &&
      t.rows > 0 && t.momentum == nullptr) {
    return invalid_argument(table, 0, "row-wise Adagrad needs momentum");
  }
  if (optimizer != nullptr && optimizer->type == OptimizerType::kAdam && t.rows > 0 &&
      (t.exp_avg == nullptr || t.exp_avg_sq == nullptr)) {
    return invalid_argument(table, 0, "Adam needs exp_avg and exp_avg_sq");
  }
  return check_offsets(t, table, batch.batch_size);
}

}  // namespace

Status check_arguments(const FusedBatch& batch, const OptimizerConfig* optimizer) {
  if (optimizer != nullptr && optimizer->type == OptimizerType::kAdam && optimizer->step < 1) {
    return invalid_argument(-1, optimizer->step, "Adam's step must be >= 1");
  }
  if (batch.batch_size < 0 || batch.batch_size >= kMaxTableIndices) {
    return invalid_argument(-1, batch.batch_size, "batch_size must be in [0, 2^32)");
  }
  for (int t = 0; t < static_cast<int>(batch.tables.size()); ++t) {
    Status s = check_table(batch, t, optimizer);
    if (!s.ok()) return s;
  }
  return {};
}

}  // namespace detail
}  // namespace embshard
