// The CUDA TBE operator against the scalar reference (tbe_forward_ref, and
// tbe_backward_update_ref's steps summed in double) on random problems with
// fixed seeds: dims, pooling modes, weights, optimizers, duplicates, many
// tables, bad indices.
// Guards past every device buffer a kernel writes (output, weights,
// momentum) must survive. Every test is skipped, saying why, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <utility>
#include <string>

#include "embshard/kernel/tbe_cuda.h"
#include "embshard/util/statistics.h"
#include "kernel/tbe_test_util.h"

namespace embshard {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::TableShape;

#define SKIP_WITHOUT_CUDA()                                                  \
  std::string why;                                                           \
  if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why

// fp32 sums in a different order (parallel groups, FMA) than the reference.
// The relative part covers the reference's own rounding on hot rows (a row
// with thousands of occurrences has a gradient ~30 and momentum ~1000); a
// lost or doubled occurrence moves a weight by ~1e-3, far outside.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    const float tol = 3e-5f + 5e-5f * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
      ++failures;
    }
  }
}

void expect_guards(const CudaTbe& tbe, const std::string& what) {
  EXPECT_EQ(tbe.damaged_guards(), "") << what;
}

// Forward twice (the output is overwritten, not accumulated) against the reference.
void check_forward(const Problem& p, const std::string& what) {
  Problem::State state = p.initial_state();
  const FusedBatch batch = p.batch(state);
  std::vector<float> want(batch.batch_size * batch.total_dim());
  ASSERT_TRUE(tbe_forward_ref(batch, want.data()).ok()) << what;
  CudaTbe tbe(batch, OptimizerConfig{});
  ASSERT_EQ(tbe.output_size(), static_cast<int64_t>(want.size()));
  for (int call = 0; call < 2; ++call) {
    const Status s = tbe.forward();
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    expect_close(tbe.download_output(), want, what + " forward call " + std::to_string(call));
  }
  expect_guards(tbe, what);
}

void expect_state(const CudaTbe& tbe, const Problem& p, const Problem::State& want,
                  const std::string& what) {
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    const int table = static_cast<int>(t);
    expect_close(tbe.download_weights(table), want.weights[t], what + " weights t" + std::to_string(t));
    expect_close(tbe.download_momentum(table), want.momentum[t],
                 what + " momentum t" + std::to_string(t));
  }
}

// The scalar reference's backward and update (tbe_backward_update_ref) with
// each row's gradient summed in double: the kernel sums a hot row's
// thousands of occurrences in chunks, in another order than the float
// reference, and both are then within rounding of this one, not of each other.
void backward_update_f64(const Problem& p, Problem::State& state, const OptimizerConfig& opt) {
  int64_t total_dim = 0, column = 0;
  for (const TableShape& shape : p.shapes) total_dim += shape.dim;
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    const int dim = p.shapes[t].dim;
    std::map<int64_t, std::vector<double>> grads;
    for (int64_t b = 0; b < p.batch_size; ++b) {
      const int64_t begin = p.offsets[t][b], end = p.offsets[t][b + 1];
      const float* g = p.grad_output.data() + b * total_dim + column;
      for (int64_t i = begin; i < end; ++i) {
        std::vector<double>& acc = grads[p.indices[t][i]];
        acc.resize(dim, 0.0);
        const float scale = p.pooling == PoolingMode::kMean ? 1.0f / static_cast<float>(end - begin)
                            : p.shapes[t].weighted          ? p.per_sample_weights[t][i]
                                                            : 1.0f;
        for (int d = 0; d < dim; ++d) acc[d] += static_cast<double>(scale * g[d]);
      }
    }
    for (const auto& [row, grad] : grads) {
      float* w = state.weights[t].data() + row * dim;
      double step = opt.learning_rate;
      if (opt.type == OptimizerType::kRowWiseAdagrad) {
        double sum_sq = 0;
        for (double x : grad) sum_sq += x * x;
        const double m = state.momentum[t][row] + sum_sq / dim;
        state.momentum[t][row] = static_cast<float>(m);
        step = opt.learning_rate / (std::sqrt(m) + opt.eps);
      }
      for (int d = 0; d < dim; ++d) w[d] = static_cast<float>(w[d] - step * grad[d]);
    }
    column += dim;
  }
}

// Two backward calls (the second reuses every scratch buffer) against two
// reference calls.
void check_backward(const Problem& p, const OptimizerConfig& opt, const std::string& what) {
  Problem::State ref = p.initial_state(), ours = p.initial_state();
  CudaTbe tbe(p.batch(ours), opt);
  tbe.set_grad_output(p.grad_output.data());
  for (int call = 0; call < 2; ++call) {
    backward_update_f64(p, ref, opt);
    const Status s = tbe.backward_update();
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    expect_state(tbe, p, ref, what + " call " + std::to_string(call));
  }
  expect_guards(tbe, what);
}

const OptimizerConfig kSgd{OptimizerType::kSgd, 0.05f, 1e-8f};
const OptimizerConfig kAdagrad{OptimizerType::kRowWiseAdagrad, 0.05f, 1e-8f};

std::string describe(int dim, PoolingMode pooling, bool weighted) {
  return "dim " + std::to_string(dim) + (pooling == PoolingMode::kMean ? " mean" : " sum") +
         (weighted ? " weighted" : "");
}

const int kDims[] = {1, 3, 4, 7, 8, 16, 17, 32, 64, 128, 129, 256, 1023, 1024};

TEST(CudaTbeForward, MatchesReferenceAcrossDims) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 11;
  for (int dim : kDims) {
    for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
      for (bool weighted : {false, true}) {
        if (weighted && pooling == PoolingMode::kMean) continue;
        const int64_t rows = dim >= 1000 ? 50 : 300;
        const Problem p =
            make_problem({TableShape{rows, dim, 9, weighted, 0.15}}, 37, pooling, ++seed);
        check_forward(p, describe(dim, pooling, weighted));
      }
    }
  }
}

TEST(CudaTbeBackward, MatchesReferenceAcrossDimsAndOptimizers) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 101;
  for (int dim : kDims) {
    for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
      for (bool weighted : {false, true}) {
        if (weighted && pooling == PoolingMode::kMean) continue;
        const int64_t rows = dim >= 1000 ? 40 : 200;
        const Problem p =
            make_problem({TableShape{rows, dim, 9, weighted, 0.15}}, 41, pooling, ++seed);
        check_backward(p, kSgd, describe(dim, pooling, weighted) + " sgd");
        check_backward(p, kAdagrad, describe(dim, pooling, weighted) + " adagrad");
      }
    }
  }
}

std::vector<TableShape> mixed_tables() {
  return {TableShape{1, 5, 4, false, 0.3},        TableShape{1000, 64, 20, true, 0.05},
          TableShape{70000, 16, 12, false, 0.2},   TableShape{3, 129, 6, true, 0.5},
          TableShape{5000, 128, 30, false, 0.0},   TableShape{2500, 32, 3, true, 0.9},
          TableShape{20, 1024, 2, false, 0.1},     TableShape{400, 3, 7, true, 0.1}};
}

void check_fused(std::vector<TableShape> shapes, int64_t batch_size, uint64_t seed,
                 const std::string& what) {
  for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
    if (pooling == PoolingMode::kMean) {
      for (TableShape& s : shapes) s.weighted = false;
    }
    const Problem p = make_problem(shapes, batch_size, pooling, seed);
    const std::string name = what + (pooling == PoolingMode::kMean ? " mean" : " sum");
    check_forward(p, name);
    check_backward(p, kSgd, name + " sgd");
    check_backward(p, kAdagrad, name + " adagrad");
  }
}

TEST(CudaTbeFused, MixedTablesInOneCall) {
  SKIP_WITHOUT_CUDA();
  check_fused(mixed_tables(), 333, 7, "mixed");
}

// 60 tables of every dim class: one forward launch, one sort across tables.
TEST(CudaTbeFused, SixtyTables) {
  SKIP_WITHOUT_CUDA();
  std::vector<TableShape> shapes;
  const int dims[] = {1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 200, 256, 512, 1000,
                      1024};
  for (int t = 0; t < 60; ++t) {
    const int dim = dims[(t * 7) % 20];
    const int64_t rows = 1 + (t * 7919) % (dim >= 512 ? 300 : 20000);
    shapes.push_back(TableShape{rows, dim, 1 + t % 17, t % 3 == 0, t % 5 == 0 ? 0.5 : 0.1});
  }
  check_fused(shapes, 129, 60, "60 tables");
}

TEST(CudaTbeFused, BatchOfOne) {
  SKIP_WITHOUT_CUDA();
  check_fused(mixed_tables(), 1, 8, "batch of 1");
}

// Hot rows shared by many bags: thousands of occurrences of one row, summed
// by many lane groups of one warp.
TEST(CudaTbeBackward, ManyDuplicateIndices) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem({TableShape{5, 33, 40, true, 0.0}, TableShape{3, 8, 40, false, 0.0},
                                  TableShape{2, 1, 60, true, 0.0}, TableShape{2, 512, 30, false, 0.0}},
                                 500, PoolingMode::kSum, 29);
  check_forward(p, "duplicates");
  check_backward(p, kSgd, "duplicates sgd");
  check_backward(p, kAdagrad, "duplicates adagrad");
}

// Rows with about as many occurrences as a backward chunk (kRunChunk, 256):
// some summed by one warp, some split across chunks, hot runs side by side
// and starting anywhere in a chunk.
TEST(CudaTbeBackward, RowsNearTheHotThreshold) {
  SKIP_WITHOUT_CUDA();
  for (int dim : {1, 16, 129}) {
    const Problem p =
        make_problem({TableShape{80, dim, 40, false, 0.0}, TableShape{1, dim, 1, true, 0.5},
                      TableShape{40, dim, 20, true, 0.0}},
                     1000, PoolingMode::kSum, 300 + dim);
    check_backward(p, kSgd, "near the threshold dim " + std::to_string(dim) + " sgd");
    check_backward(p, kAdagrad, "near the threshold dim " + std::to_string(dim) + " adagrad");
  }
}

TEST(CudaTbeFused, OneRowTablesSumEveryOccurrence) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem({TableShape{1, 17, 12, true, 0.1}, TableShape{1, 3, 5, false, 0.0},
                                  TableShape{1, 128, 9, false, 0.2}},
                                 50, PoolingMode::kSum, 5);
  check_forward(p, "one row");
  check_backward(p, kAdagrad, "one row");
}

TEST(CudaTbeFused, EmptyBagsGiveZerosAndNoUpdate) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem({TableShape{10, 7, 0, false, 1.0}, TableShape{10, 64, 5, false, 1.0}},
                                 16, PoolingMode::kMean, 3);
  Problem::State state = p.initial_state();
  CudaTbe tbe(p.batch(state), kAdagrad);
  ASSERT_TRUE(tbe.forward().ok());
  const std::vector<float> out = tbe.download_output();
  ASSERT_EQ(out.size(), 16u * 71u);
  for (float x : out) ASSERT_EQ(x, 0.0f);
  tbe.set_grad_output(p.grad_output.data());
  ASSERT_TRUE(tbe.backward_update().ok());
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(tbe.download_weights(t), p.weights[t]);
    EXPECT_EQ(tbe.download_momentum(t), p.momentum[t]);
  }
  expect_guards(tbe, "empty bags");
}

TEST(CudaTbeFused, ZeroBatchAndNoTables) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem({TableShape{10, 8, 3, false, 0.0}}, 0, PoolingMode::kSum, 4);
  Problem::State state = p.initial_state();
  CudaTbe tbe(p.batch(state), kSgd);
  EXPECT_EQ(tbe.output_size(), 0);
  EXPECT_TRUE(tbe.forward().ok());
  tbe.set_grad_output(nullptr);
  EXPECT_TRUE(tbe.backward_update().ok());
  EXPECT_EQ(tbe.download_weights(0), p.weights[0]);
  CudaTbe none(FusedBatch{}, kSgd);
  EXPECT_TRUE(none.forward().ok());
  expect_guards(tbe, "zero batch");
}

// SGD needs no momentum: a table without one is fine, and stays without.
TEST(CudaTbeBackward, SgdWithoutMomentum) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem({TableShape{300, 24, 6, false, 0.1}}, 64, PoolingMode::kSum, 12);
  Problem::State ref = p.initial_state(), ours = p.initial_state();
  FusedBatch ref_batch = p.batch(ref), our_batch = p.batch(ours);
  ref_batch.tables[0].momentum = nullptr;
  our_batch.tables[0].momentum = nullptr;
  ASSERT_TRUE(tbe_backward_update_ref(ref_batch, p.grad_output.data(), kSgd).ok());
  CudaTbe tbe(our_batch, kSgd);
  tbe.set_grad_output(p.grad_output.data());
  ASSERT_TRUE(tbe.backward_update().ok());
  expect_close(tbe.download_weights(0), ref.weights[0], "sgd without momentum");
  EXPECT_TRUE(tbe.download_momentum(0).empty());
  expect_guards(tbe, "sgd without momentum");
}

// time_step runs one forward and one backward + update: the same state as
// the reference after both, and positive event times.
TEST(CudaTbeTiming, TimeStepIsForwardThenBackward) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem(mixed_tables(), 200, PoolingMode::kSum, 31);
  Problem::State ref = p.initial_state(), ours = p.initial_state();
  const FusedBatch ref_batch = p.batch(ref);
  std::vector<float> want(ref_batch.batch_size * ref_batch.total_dim());
  ASSERT_TRUE(tbe_forward_ref(ref_batch, want.data()).ok());
  ASSERT_TRUE(tbe_backward_update_ref(ref_batch, p.grad_output.data(), kAdagrad).ok());
  CudaTbe tbe(p.batch(ours), kAdagrad);
  tbe.set_grad_output(p.grad_output.data());
  const StepTiming t = tbe.time_step();
  EXPECT_GT(t.fwd_ms, 0.0);
  EXPECT_GT(t.bwd_ms, 0.0);
  expect_close(tbe.download_output(), want, "time_step output");
  expect_state(tbe, p, ref, "time_step");
  expect_guards(tbe, "time_step");
}

void expect_same_status(const Status& got, const Status& want) {
  EXPECT_EQ(got.code, want.code) << got.message() << " vs " << want.message();
  EXPECT_EQ(got.table, want.table);
  EXPECT_EQ(got.position, want.position);
  EXPECT_EQ(got.value, want.value);
  EXPECT_EQ(got.message(), want.message());
}

// A bad index: the CPU reference's status from forward and backward, and
// nothing written (output still unwritten, weights and momentum unchanged).
void check_bad_index(Problem p, int table, int64_t position, int64_t value) {
  p.indices[table].at(position) = value;
  Problem::State state = p.initial_state();
  const FusedBatch batch = p.batch(state);
  std::vector<float> out(batch.batch_size * batch.total_dim());
  const Status want = tbe_forward_ref(batch, out.data());
  ASSERT_EQ(want.code, Status::Code::kIndexOutOfRange);
  ASSERT_EQ(want.table, table);
  ASSERT_EQ(want.position, position);
  for (const OptimizerConfig& opt : {kSgd, kAdagrad}) {
    CudaTbe tbe(batch, opt);
    expect_same_status(tbe.forward(), want);
    for (float x : tbe.download_output()) ASSERT_EQ(x, CudaTbe::kUnwrittenValue);
    tbe.set_grad_output(p.grad_output.data());
    expect_same_status(tbe.backward_update(), want);
    expect_same_status(tbe_backward_update_ref(batch, p.grad_output.data(), opt), want);
    for (size_t t = 0; t < p.shapes.size(); ++t) {
      ASSERT_EQ(tbe.download_weights(static_cast<int>(t)), p.weights[t]);
      ASSERT_EQ(tbe.download_momentum(static_cast<int>(t)), p.momentum[t]);
    }
    expect_guards(tbe, "bad index");
  }
}

TEST(CudaTbeErrors, OutOfRangeIndexIsReportedAndNothingWritten) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem(mixed_tables(), 64, PoolingMode::kSum, 9);
  const int64_t last = static_cast<int64_t>(p.indices[4].size()) - 1;
  check_bad_index(p, 4, last, p.shapes[4].rows);
  check_bad_index(p, 1, 3, 1000000007);
  check_bad_index(p, 0, 0, -1);
}

TEST(CudaTbeErrors, FirstBadIndexInTableThenPositionOrder) {
  SKIP_WITHOUT_CUDA();
  Problem p = make_problem(mixed_tables(), 64, PoolingMode::kSum, 9);
  p.indices[5].at(2) = -3;  // later table: not reported
  p.indices[2].at(40) = 1 << 20;
  check_bad_index(p, 2, 1, 70000);  // earlier position in the same table: reported
}

TEST(CudaTbeErrors, InvalidArgumentsAsOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  Problem p = make_problem({TableShape{10, 8, 4, true, 0.0}}, 8, PoolingMode::kMean, 2);
  Problem::State state = p.initial_state();
  FusedBatch batch = p.batch(state);
  std::vector<float> out(64);
  {
    CudaTbe tbe(batch, kSgd);  // mean with per-sample weights
    expect_same_status(tbe.forward(), tbe_forward_ref(batch, out.data()));
    EXPECT_EQ(tbe.forward().code, Status::Code::kInvalidArgument);
    tbe.set_grad_output(p.grad_output.data());
    EXPECT_EQ(tbe.backward_update().code, Status::Code::kInvalidArgument);
  }
  batch.tables[0].per_sample_weights = nullptr;
  batch.tables[0].momentum = nullptr;
  {
    CudaTbe tbe(batch, kAdagrad);  // row-wise Adagrad without momentum: forward only
    EXPECT_TRUE(tbe.forward().ok());
    tbe.set_grad_output(p.grad_output.data());
    expect_same_status(tbe.backward_update(),
                       tbe_backward_update_ref(batch, p.grad_output.data(), kAdagrad));
  }
  batch.tables[0].dim = 1025;
  CudaTbe too_wide(batch, kSgd);
  EXPECT_EQ(too_wide.forward().code, Status::Code::kInvalidArgument);
  EXPECT_TRUE(too_wide.download_output().empty());
}

TEST(CudaTbeErrors, BackwardWithoutGradOutputIsInvalid) {
  SKIP_WITHOUT_CUDA();
  const Problem p = make_problem({TableShape{10, 8, 4, false, 0.0}}, 8, PoolingMode::kSum, 2);
  Problem::State state = p.initial_state();
  CudaTbe tbe(p.batch(state), kSgd);
  const Status s = tbe.backward_update();
  EXPECT_EQ(s.code, Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("grad_output"), std::string::npos) << s.message();
}

// Not a benchmark (embshard bench owns those): one figure per shape from
// time_step, printed so the docs can quote a real run. Uniform indices over
// tables far larger than the L2 cache, so the rows come from HBM.
struct Owned {
  std::vector<std::vector<float>> weights, momentum;
  std::vector<std::vector<int64_t>> offsets, indices;
  FusedBatch batch;
};

// Rows drawn uniformly, except that a `hot_share` of the lookups go to row 0.
Owned uniform_batch(const std::vector<std::pair<int64_t, int>>& tables, int64_t batch_size,
                    int pooling, uint64_t seed, double hot_share = 0.0) {
  Owned o;
  std::mt19937_64 rng(seed);
  o.batch.batch_size = batch_size;
  for (const auto& [rows, dim] : tables) {
    o.weights.emplace_back(rows * dim);
    for (size_t i = 0; i < o.weights.back().size(); ++i) {
      o.weights.back()[i] = static_cast<float>(static_cast<int>(i % 2001) - 1000) * 1e-4f;
    }
    o.momentum.emplace_back(rows, 0.0f);
    std::uniform_int_distribution<int64_t> row(0, rows - 1);
    o.offsets.emplace_back();
    o.indices.emplace_back();
    for (int64_t b = 0; b <= batch_size; ++b) o.offsets.back().push_back(b * pooling);
    std::bernoulli_distribution hot(hot_share);
    for (int64_t i = 0; i < batch_size * pooling; ++i) {
      o.indices.back().push_back(hot(rng) ? 0 : row(rng));
    }
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    TableBatch tb;
    tb.weights = o.weights[t].data();
    tb.momentum = o.momentum[t].data();
    tb.rows = tables[t].first;
    tb.dim = tables[t].second;
    tb.offsets = o.offsets[t].data();
    tb.indices = o.indices[t].data();
    o.batch.tables.push_back(tb);
  }
  return o;
}

void report_step(const std::string& name, const FusedBatch& batch, double d2d_gb_per_s) {
  CudaTbe tbe(batch, kAdagrad);
  ASSERT_TRUE(tbe.forward_status().ok()) << tbe.forward_status().message();
  std::vector<float> grad(tbe.output_size(), 1e-3f);
  tbe.set_grad_output(grad.data());
  std::vector<double> fwd, bwd;
  for (int i = 0; i < 25; ++i) {
    const StepTiming t = tbe.time_step();
    if (i < 5) continue;  // warm-up
    fwd.push_back(t.fwd_ms);
    bwd.push_back(t.bwd_ms);
  }
  const TbeUsefulBytes bytes = tbe_forward_useful_bytes(batch);
  const double fwd_ms = median(fwd), bwd_ms = median(bwd);
  std::printf(
      "[ figures  ] %s: %lld lookups, fwd %.4f ms (%.0f GB/s useful, %.2f of d2d copy %.0f GB/s), "
      "bwd+adagrad %.4f ms, median of 20\n",
      name.c_str(), static_cast<long long>(bytes.lookups), fwd_ms, bytes.gb_per_s(fwd_ms),
      bytes.gb_per_s(fwd_ms) / d2d_gb_per_s, d2d_gb_per_s, bwd_ms);
  EXPECT_GT(fwd_ms, 0.0);
  EXPECT_GT(bwd_ms, 0.0);
  expect_guards(tbe, name);
}

TEST(CudaTbeTiming, ReportsFiguresOnLargeTables) {
  SKIP_WITHOUT_CUDA();
  const double d2d = cuda_d2d_copy_gb_per_s(int64_t{512} << 20, 10);
  EXPECT_GT(d2d, 0.0);
  std::printf("[ figures  ] device %s\n", cuda_device_name().c_str());
  {
    const Owned o = uniform_batch({{2000000, 128}}, 4096, 32, 1);
    report_step("1 table 2M x 128, B 4096, pooling 32", o.batch, d2d);
  }
  {
    std::vector<std::pair<int64_t, int>> tables;
    const int dims[] = {128, 32, 64, 32};  // 1 GiB of weights in all
    for (int t = 0; t < 16; ++t) tables.emplace_back(250000, dims[t % 4]);
    const Owned o = uniform_batch(tables, 4096, 16, 2);
    report_step("16 tables 250K x {128,32,64,32}, B 4096, pooling 16", o.batch, d2d);
  }
  for (double hot_share : {0.0, 0.5}) {  // a hot row must not hold the backward up
    const Owned o = uniform_batch({{2000000, 64}}, 16384, 32, 3, hot_share);
    report_step(std::string("1 table 2M x 64, B 16384, pooling 32, ") +
                    (hot_share > 0 ? "half the lookups on one row" : "uniform rows"),
                o.batch, d2d);
  }
}

}  // namespace
}  // namespace embshard
