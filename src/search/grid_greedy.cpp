// The greedy grid search inside every NeuroShard beam step.
#include "grid_greedy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "embshard/util/error.h"

namespace embshard::search {

CostCache::CostCache(int log2_entries) {
  ES_CHECK(log2_entries >= 4 && log2_entries <= 30, "cost cache size 2^{} is out of range 2^4..2^30",
           log2_entries);
  entries_.resize(size_t{1} << log2_entries);
  mask_ = entries_.size() - 1;
}

void Layout::reset(int devices, size_t pieces, size_t state_size, size_t groups) {
  // A model with an incremental state costs from it: no lists of ids (at
  // 10,000 pieces x 1,024 devices their reserve alone was 40 MB a layout).
  ids.resize(devices);
  for (auto& v : ids) {
    v.clear();
    if (state_size == 0) v.reserve(pieces + 1);
  }
  key.assign(devices, 0);
  mem_bytes.assign(devices, 0);
  dim_sum.assign(devices, 0.0);
  a2a_dim.assign(devices, 0.0);
  collectives.reset(devices);
  group_on.assign(groups * devices, 0);
  compute_ms.assign(devices, 0.0);
  sum_sq_ms.assign(devices, 0.0);
  device_of.assign(pieces, -1);
  by_compute.resize(devices);
  std::iota(by_compute.begin(), by_compute.end(), 0);
  state.assign(devices * state_size, 0.0);
}

void Layout::copy_from(const Layout& other) {
  // Capacities were reserved by reset(): these copies do not allocate.
  for (size_t d = 0; d < ids.size(); ++d) ids[d].assign(other.ids[d].begin(), other.ids[d].end());
  key = other.key;
  mem_bytes = other.mem_bytes;
  dim_sum = other.dim_sum;
  a2a_dim = other.a2a_dim;
  collectives = other.collectives;
  group_on = other.group_on;
  compute_ms = other.compute_ms;
  sum_sq_ms = other.sum_sq_ms;
  device_of = other.device_of;
  by_compute = other.by_compute;
  state = other.state;
}

void Layout::place(size_t index, int d, const Piece& p, double fused_ms,
                   const ComputeModel& model) {
  if (const size_t n = state.size() / ids.size(); n > 0) {
    model.add_to_state(p.id, std::span<double>(state.data() + d * n, n));
  } else {
    ids[d].push_back(p.id);
  }
  key[d] += piece_key(p.id);
  mem_bytes[d] += p.mem_bytes;
  if (!p.replica) dim_sum[d] += p.cols;
  if (!p.replica && p.group < 0) a2a_dim[d] += p.cols;
  if (p.group >= 0) {
    collectives.add_row_shard(d, p.cols, p.index_bytes);
    group_on[static_cast<size_t>(p.group) * ids.size() + d] = 1;
  }
  compute_ms[d] = fused_ms;
  sum_sq_ms[d] += p.single_ms * p.single_ms;
  device_of[index] = d;
  // Keep by_compute sorted by (compute, index): d only got dearer, so it
  // moves right, past every device now before it.
  const auto at = std::find(by_compute.begin(), by_compute.end(), d);
  const auto to = std::upper_bound(at + 1, by_compute.end(), d, [&](int a, int b) {
    return compute_ms[a] < compute_ms[b] || (compute_ms[a] == compute_ms[b] && a < b);
  });
  std::rotate(at, at + 1, to);
}

GridGreedy::GridGreedy(const PlanTask& task, const CostModel& model, const PlannerOptions& options)
    : task_(task),
      compute_(*model.compute),
      comm_(*model.comm),
      cache_(options.budget.cache_log2_entries),
      grid_steps_(options.budget.grid_steps),
      cap_low_(options.budget.cap_low),
      cap_high_(options.budget.cap_high),
      prune_(options.budget.prune_monotone),
      patience_(options.budget.scan_patience),
      uncertainty_(options.uncertainty),
      state_size_(model.compute->state_size()),
      scratch_state_(state_size_),
      iteration_(*model.comm, task.num_devices()) {
  set_grid(grid_steps_, cap_low_, cap_high_);
  const size_t n = task.num_devices();
  cand_ms_.resize(n);
}

void GridGreedy::set_grid(int steps, double low, double high) {
  ES_CHECK(steps >= 1, "grid steps is {}, must be at least 1", steps);
  ES_CHECK(low > 0 && high >= low, "dim-sum caps {}..{} x mean are not a range", low, high);
  grid_steps_ = steps;
  cap_low_ = low;
  cap_high_ = high;
}

Layout& GridGreedy::acquire() {
  while (pool_.size() <= depth_) pool_.push_back(std::make_unique<Layout>());
  Layout& l = *pool_[depth_];
  const size_t n = task_.num_devices();
  if (l.device_of.size() != pieces_->size() || l.ids.size() != n ||
      l.group_on.size() != groups_ * n) {
    l.reset(task_.num_devices(), pieces_->size(), state_size_, groups_);
  }
  return l;
}

// The model's fused cost (cached) plus the uncertainty's penalty, which
// grows with every piece too: pruning stays exact.
double GridGreedy::fused_ms(Layout& layout, int d, const Piece& p) {
  const double penalty =
      uncertainty_ > 0 ? uncertainty_ * std::sqrt(layout.sum_sq_ms[d] + p.single_ms * p.single_ms)
                       : 0.0;
  return model_ms(layout, d, p) + penalty;
}

double GridGreedy::model_ms(Layout& layout, int d, const Piece& p) {
  const uint64_t key = layout.key[d] + piece_key(p.id);
  double ms;
  if (cache_.find(key, ms)) {
    ++cache_.hits;
    return ms;
  }
  ++cache_.misses;
  if (state_size_ > 0) {
    const double* device = layout.state.data() + d * state_size_;
    std::copy(device, device + state_size_, scratch_state_.begin());
    compute_.add_to_state(p.id, scratch_state_);
    ms = compute_.state_ms(scratch_state_);
  } else {
    std::vector<int>& ids = layout.ids[d];
    ids.push_back(p.id);
    ms = compute_.compute_ms(ids);
    ids.pop_back();
  }
  cache_.put(key, ms);
  return ms;
}

// The iteration's cost (IterationCost, as a plan's prediction). The forward
// all-to-all only adds: a layout already no better than the best found needs
// no forward costing (it cannot win either way).
double GridGreedy::total_ms(const Layout& layout) {
  return iteration_(layout.compute_ms, layout.a2a_dim, &layout.collectives,
                    prune_ ? best_ms_ : std::numeric_limits<double>::infinity());
}

// Fills choice[k] (device, or -1 if none has memory) for each cap of the
// group; returns true when they all agree. Costs land in cand_ms_.
//
// Each cap takes the cheapest device under it; where no device is under a
// cap, the cap yields: the cheapest device with memory left (the fallback)
// takes the piece (a cap balances comm, memory is a must). Devices are tried
// in ascending order of compute, and a device is costed only if it could
// beat what some cap (or the fallback) holds: with pruning, not once its
// compute alone is no cheaper, nor, with patience, once that many costed
// devices in a row beat nothing. Ties go to the lower device index.
//
// Which holders a device may still beat changes only when a device is costed
// or the scan's compute passes a holder's cost, so the scan keeps what that
// allows (Open) and refreshes it only then: at a thousand devices most of
// the scan is devices over every open cap, each a few loads.
bool GridGreedy::choose(Layout& L, const Piece& p, const std::vector<int>& caps,
                        std::vector<int>& choice) {
  const size_t m = caps.size();
  std::fill(choice.begin(), choice.end(), -1);
  int fallback = -1, stale = 0;  // stale: devices costed in a row that beat nothing held
  auto better = [&](int d, int held) {
    return held < 0 || cand_ms_[d] < cand_ms_[held] || (cand_ms_[d] == cand_ms_[held] && d < held);
  };
  const double no_cap = -std::numeric_limits<double>::infinity();
  struct Open {
    bool fallback = true;  // any device with memory may beat the fallback
    double dim = 0;        // the largest dim sum a cap that may be beaten allows
    double at = 0;         // the compute it was made for
    double until = 0;      // compute at which some holder can no longer be beaten
  } open;
  // What a device of compute c may still beat (a holder -1: none yet).
  const auto refresh = [&](double c) {
    const bool patient = patience_ > 0 && stale >= patience_;
    open.at = c;
    open.until = std::numeric_limits<double>::infinity();
    const auto may_beat = [&](int held) {
      if (held < 0) return true;
      if (patient) return false;
      if (!prune_) return true;
      if (c >= cand_ms_[held]) return false;
      open.until = std::min(open.until, cand_ms_[held]);
      return true;
    };
    open.fallback = may_beat(fallback);
    open.dim = no_cap;
    for (size_t k = 0; k < m; ++k) {
      if (may_beat(choice[k])) open.dim = std::max(open.dim, caps_[caps[k]]);
    }
  };
  const size_t n = L.by_compute.size();
  if (n > 0) refresh(L.compute_ms[L.by_compute[0]]);
  for (size_t j = 0; j < n; ++j) {
    if (!open.fallback && open.dim != no_cap) {
      // The devices over every open cap that leave what is open as it is,
      // passed over in a loop of their own (its bounds in registers).
      const double at = open.at, until = open.until, dim = open.dim, cols = p.cols;
      for (; j < n; ++j) {
        const int d = L.by_compute[j];
        const double c = L.compute_ms[d];
        if (c < at || c >= until || L.dim_sum[d] + cols <= dim) break;
      }
      if (j == n) break;
    }
    const int d = L.by_compute[j];
    const double c = L.compute_ms[d];
    // (A model that is not monotone can leave a device's compute below its predecessor's.)
    if (c >= open.until || c < open.at) refresh(c);
    // Every later device costs at least its compute alone, and patience only runs out.
    if (!open.fallback && open.dim == no_cap) break;
    const double dim = L.dim_sum[d] + p.cols;
    if (!open.fallback && dim > open.dim) continue;
    if (L.mem_bytes[d] + p.mem_bytes > task_.device_mem_bytes[d] || L.group_taken(p, d)) continue;
    cand_ms_[d] = fused_ms(L, d, p);
    bool improved = false;
    if (better(d, fallback)) fallback = d, improved = true;
    for (size_t k = 0; k < m; ++k) {
      if (dim <= caps_[caps[k]] && better(d, choice[k])) choice[k] = d, improved = true;
    }
    stale = improved ? 0 : stale + 1;
    refresh(c);
  }
  bool same = true;
  for (size_t k = 0; k < m; ++k) {
    if (choice[k] < 0) choice[k] = fallback;
    same = same && choice[k] == choice[0];
  }
  return same;
}

void GridGreedy::descend(Layout& L, size_t next, std::vector<int> caps) {
  const std::vector<Piece>& pieces = *pieces_;
  std::vector<int> choice(caps.size()), sub;
  for (size_t i = next; i < pieces.size(); ++i) {
    // A device's compute only grows from here and its communication is at
    // least the comm model's floor: once the dearest device's compute plus
    // that floor reaches the best cost found (or the caller's cutoff), no
    // completion of this layout can beat it.
    if (prune_ && L.compute_ms[L.by_compute.back()] + comm_floor_ms_ >= best_ms_) {
      over_cutoff_ = true;
      return;
    }
    const Piece& p = pieces[i];
    if (p.replica) continue;  // placed on every device at the root
    const int pin = required_device(task_, p);
    if (pin >= 0) {
      if (L.mem_bytes[pin] + p.mem_bytes > task_.device_mem_bytes[pin]) return;
      L.place(i, pin, p, fused_ms(L, pin, p), compute_);
      continue;
    }
    if (!choose(L, p, caps, choice)) {
      // Fork: caps that chose another device continue on a copy.
      std::vector<double> chosen_ms(choice.size());
      for (size_t k = 0; k < choice.size(); ++k) chosen_ms[k] = choice[k] >= 0 ? cand_ms_[choice[k]] : 0;
      std::vector<uint8_t> done(choice.size(), 0);
      for (size_t k = 1; k < choice.size(); ++k) {
        if (done[k] || choice[k] == choice[0]) continue;
        sub.clear();
        for (size_t j = k; j < choice.size(); ++j) {
          if (choice[j] == choice[k]) sub.push_back(caps[j]), done[j] = 1;
        }
        if (choice[k] < 0) continue;
        Layout& f = acquire();
        f.copy_from(L);
        f.place(i, choice[k], p, chosen_ms[k], compute_);
        ++depth_;
        descend(f, i + 1, sub);
        --depth_;
      }
      sub.clear();
      for (size_t k = 0; k < choice.size(); ++k) {
        if (choice[k] == choice[0]) sub.push_back(caps[k]);
      }
      caps.swap(sub);
      choice.resize(caps.size());
      if (choice[0] < 0) return;
      L.place(i, choice[0], p, chosen_ms[0], compute_);
      continue;
    }
    if (choice[0] < 0) return;  // no device has memory left for this piece
    L.place(i, choice[0], p, cand_ms_[choice[0]], compute_);
  }
  const double ms = total_ms(L);
  if (ms < best_ms_) {
    best_ms_ = ms;
    const int k = caps[caps.size() / 2];
    best_cap_ = grid_steps_ > 1 ? cap_low_ + (cap_high_ - cap_low_) * k / (grid_steps_ - 1) : cap_low_;
    found_ = true;
    *best_device_of_ = L.device_of;
  } else {
    over_cutoff_ = true;
  }
}

double GridGreedy::run(const std::vector<Piece>& pieces, std::vector<int>& device_of,
                       double cutoff_ms) {
  pieces_ = &pieces;
  found_ = over_cutoff_ = false;
  double total_cols = 0, alltoall_cols = 0;
  groups_ = 0;
  allreduce_bytes_ = 0;
  for (const Piece& p : pieces) {
    if (!p.replica) total_cols += p.cols;
    if (!p.replica && p.group < 0) alltoall_cols += p.cols;
    if (p.replica) {
      allreduce_bytes_ += static_cast<double>(p.rows) *
                          data_type_row_bytes(task_.tables[p.table].data_type, p.cols);
    }
    groups_ = std::max(groups_, static_cast<size_t>(p.group + 1));
  }
  comm_floor_ms_ = comm_.floor_ms(alltoall_cols, task_.num_devices());
  const double mean = total_cols / task_.num_devices();
  caps_.resize(grid_steps_);
  for (int k = 0; k < grid_steps_; ++k) {
    const double f = grid_steps_ > 1 ? static_cast<double>(k) / (grid_steps_ - 1) : 0.0;
    caps_[k] = mean * (cap_low_ + (cap_high_ - cap_low_) * f);
  }
  depth_ = 0;
  Layout& root = acquire();
  root.reset(task_.num_devices(), pieces.size(), state_size_, groups_);
  root.collectives.allreduce_bytes = allreduce_bytes_;
  // Replicas: on every device before the greedy starts.
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].replica) continue;
    for (int d = 0; d < task_.num_devices(); ++d) {
      if (root.mem_bytes[d] + pieces[i].mem_bytes > task_.device_mem_bytes[d]) {
        device_of.clear();
        return std::numeric_limits<double>::infinity();
      }
      root.place(i, d, pieces[i], fused_ms(root, d, pieces[i]), compute_);
    }
  }
  depth_ = 1;
  best_ms_ = cutoff_ms;
  best_device_of_ = &device_of;
  device_of.clear();
  std::vector<int> all(grid_steps_);
  std::iota(all.begin(), all.end(), 0);
  descend(root, 0, std::move(all));
  return found_ ? best_ms_ : std::numeric_limits<double>::infinity();
}

}  // namespace embshard::search
