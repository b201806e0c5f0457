// Communication models: what the all-to-alls of a placement cost.
//
// Model parallelism sends every device's pooled embeddings to the devices that
// own the samples (forward) and their gradients back (backward). What a device
// pays depends on the dim sums of all devices and, forward, on how long it
// waits for the last device to finish its compute (the straggler effect).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace embshard {

// The collectives of row-wise and data-parallel pieces, per iteration (the
// pooled all-to-all of table- and column-wise pieces is comm_ms's):
// - row-wise input distribution: an all-to-all of the lookup indices, each
//   row shard receiving those of the global batch that fall in its rows;
// - row-wise output: forward, a reduce-scatter of the row shards' partial
//   pooled sums (global batch x the shard's columns, 4 bytes each) so that each
//   device gets its slice summed; backward, an all-gather of the gradients of
//   those sums back to every row shard;
// - data parallel: an all-reduce of every replicated table's gradient
//   (rows x dim x 4 bytes; TorchRec's DP tables are dense DDP parameters).
struct CollectiveLoad {
  std::vector<double> rw_dim_sums;       // per device: columns of its row shards
  std::vector<double> index_recv_bytes;  // per device: indices its row shards receive
  std::vector<double> index_send_bytes;  // per device: of its batch slice, sent to row shards elsewhere
  double allreduce_bytes = 0;            // all replicated tables' gradients
  bool empty() const;
  void reset(size_t devices);
  // A row shard of `cols` columns on `device` whose rows receive
  // `index_bytes` of lookup indices (index_exchange_bytes): 1/N of them come
  // from the device's own samples, each other device sends 1/N.
  void add_row_shard(int device, double cols, double index_bytes);
};

// The bytes of the lookup indices (8 each) that a row shard receives: the
// global batch's lookups of its table (pooling factor x batch) that fall in
// its rows (lookup_share of them).
inline double index_exchange_bytes(double pooling_factor, int64_t batch, double lookup_share) {
  return pooling_factor * static_cast<double>(batch) * lookup_share * 8.0;
}

class CommModel {
 public:
  virtual ~CommModel() = default;
  virtual std::string name() const = 0;
  // Per-device all-to-all ms. dim_sums[d]: sum of the dims placed on device d;
  // delays_ms[d]: how much later than the fastest device d starts its forward
  // all-to-all. Outputs have one entry per device; an empty fwd_ms or bwd_ms
  // is not computed (the backward all-to-all does not depend on the delays,
  // so the search asks for it alone, then for the forward alone).
  virtual void comm_ms(std::span<const double> dim_sums, std::span<const double> delays_ms,
                       std::span<double> fwd_ms, std::span<double> bwd_ms) const = 0;
  // Adds the ms of the collectives in `load` (one entry per device) to fwd_ms
  // and bwd_ms: forward the index all-to-all and the reduce-scatter, backward
  // the all-gather and the all-reduce. A model that learned only the pooled
  // all-to-all adds analytic terms here and says so in its name.
  virtual void collective_ms(const CollectiveLoad& load, std::span<double> fwd_ms,
                             std::span<double> bwd_ms) const = 0;
  // A floor under every device's forward + backward all-to-all ms when the
  // dim sums of `devices` devices add up to `total_dims`, however they are
  // spread: what lets the search abandon a placement before it is complete.
  // 0 unless the model can prove a higher one.
  virtual double floor_ms(double /*total_dims*/, int /*devices*/) const { return 0.0; }
  // Whether its figures are timed on the network itself (under mpirun), whose
  // hosts they then include: with_topology (cost/topology.h) adds none.
  virtual bool measures_network() const { return false; }
  // Whether it prices the forward pass alone (inference): backward figures 0.
  virtual bool forward_only() const { return false; }
};

}  // namespace embshard
