// Random TBE problems for the kernel tests (fixed seeds).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "embshard/kernel/tbe.h"

namespace embshard::testing {

struct TableShape {
  int64_t rows = 100;
  int dim = 16;
  int max_pooling = 8;       // bag lengths uniform in [0, max_pooling]
  bool weighted = false;     // per-sample weights (sum pooling only)
  double empty_bag_share = 0.1;
};

// Owns every buffer of a fused batch; batch() binds pointers to a copy of the
// weights so that two kernels can update their own copies.
struct Problem {
  int64_t batch_size = 0;
  PoolingMode pooling = PoolingMode::kSum;
  std::vector<TableShape> shapes;
  std::vector<std::vector<float>> weights, momentum, per_sample_weights;
  std::vector<std::vector<int64_t>> offsets, indices;
  std::vector<float> grad_output;

  struct State {
    std::vector<std::vector<float>> weights, momentum;
  };
  State initial_state() const { return State{weights, momentum}; }

  FusedBatch batch(State& state) const {
    FusedBatch b;
    b.batch_size = batch_size;
    b.pooling = pooling;
    for (size_t t = 0; t < shapes.size(); ++t) {
      TableBatch tb;
      tb.weights = state.weights[t].data();
      tb.momentum = state.momentum[t].data();
      tb.rows = shapes[t].rows;
      tb.dim = shapes[t].dim;
      tb.offsets = offsets[t].data();
      tb.indices = indices[t].data();
      tb.per_sample_weights = shapes[t].weighted ? per_sample_weights[t].data() : nullptr;
      b.tables.push_back(tb);
    }
    return b;
  }
};

inline Problem make_problem(const std::vector<TableShape>& shapes, int64_t batch_size,
                            PoolingMode pooling, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Problem p;
  p.batch_size = batch_size;
  p.pooling = pooling;
  p.shapes = shapes;
  int64_t total_dim = 0;
  for (const TableShape& s : shapes) {
    total_dim += s.dim;
    std::vector<float> w(s.rows * s.dim), m(s.rows), psw;
    for (float& x : w) x = value(rng);
    for (float& x : m) x = 0.5f * (value(rng) + 1.0f);
    std::vector<int64_t> offsets{0}, indices;
    std::uniform_int_distribution<int64_t> row(0, std::max<int64_t>(s.rows - 1, 0));
    std::uniform_int_distribution<int> length(0, s.max_pooling);
    for (int64_t b = 0; b < batch_size; ++b) {
      const int len = unit(rng) < s.empty_bag_share ? 0 : length(rng);
      for (int k = 0; k < len; ++k) {
        // Duplicates within and across bags: repeat the last index or hit row 0.
        const double u = unit(rng);
        if (u < 0.2 && !indices.empty()) {
          indices.push_back(indices.back());
        } else if (u < 0.35) {
          indices.push_back(0);
        } else {
          indices.push_back(row(rng));
        }
        psw.push_back(value(rng));
      }
      offsets.push_back(static_cast<int64_t>(indices.size()));
    }
    p.weights.push_back(std::move(w));
    p.momentum.push_back(std::move(m));
    p.per_sample_weights.push_back(std::move(psw));
    p.offsets.push_back(std::move(offsets));
    p.indices.push_back(std::move(indices));
  }
  p.grad_output.resize(batch_size * total_dim);
  for (float& x : p.grad_output) x = value(rng);
  return p;
}

}  // namespace embshard::testing
