// The optimized TBE kernels against the scalar reference, on random problems
// with fixed seeds: many dims, pooling modes, weights, optimizers, threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "embshard/kernel/tbe.h"
#include "kernel/tbe_test_util.h"

namespace embshard {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::TableShape;

constexpr float kSentinel = -12345.678f;
constexpr int64_t kSentinelCount = 67;
const int kDims[] = {1, 3, 7, 8, 16, 17, 32, 64, 128, 129, 1024};

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    const float tol = 1e-5f + 1e-5f * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
      ++failures;
    }
  }
}

// Output with sentinels past its end, pre-filled with garbage so that a
// kernel that skips an element is caught.
std::vector<float> make_output(int64_t size) {
  std::vector<float> out(size + kSentinelCount, 777.0f);
  std::fill(out.begin() + size, out.end(), kSentinel);
  return out;
}

void expect_sentinels(const std::vector<float>& out, int64_t size) {
  for (int64_t i = size; i < static_cast<int64_t>(out.size()); ++i) {
    ASSERT_EQ(out[i], kSentinel) << "wrote past the output at " << i;
  }
}

void check_forward(const Problem& p, int threads, const std::string& what) {
  Problem::State state = p.initial_state();
  const FusedBatch batch = p.batch(state);
  const int64_t size = batch.batch_size * batch.total_dim();
  std::vector<float> want = make_output(size), got = make_output(size);
  ASSERT_TRUE(tbe_forward_ref(batch, want.data()).ok()) << what;
  const Status s = tbe_forward(batch, got.data(), threads);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  expect_sentinels(got, size);
  expect_close(got, want, what + " forward");
}

// Sentinels past every weight and momentum buffer: an update that writes
// past a table is caught (the reference's copies carry them too).
void add_sentinels(Problem::State& state) {
  for (auto& w : state.weights) w.insert(w.end(), kSentinelCount, kSentinel);
  for (auto& m : state.momentum) m.insert(m.end(), kSentinelCount, kSentinel);
}

void expect_state_sentinels(const Problem& p, const Problem::State& state) {
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    expect_sentinels(state.weights[t], static_cast<int64_t>(p.weights[t].size()));
    expect_sentinels(state.momentum[t], static_cast<int64_t>(p.momentum[t].size()));
  }
}

void check_backward(const Problem& p, const OptimizerConfig& opt, int threads,
                    const std::string& what) {
  Problem::State ref = p.initial_state(), ours = p.initial_state();
  add_sentinels(ref);
  add_sentinels(ours);
  const FusedBatch ref_batch = p.batch(ref), our_batch = p.batch(ours);
  ASSERT_TRUE(tbe_backward_update_ref(ref_batch, p.grad_output.data(), opt).ok()) << what;
  TbeWorkspace ws;
  for (int call = 0; call < 2; ++call) {  // the second call reuses the workspace
    const Status s = tbe_backward_update(our_batch, p.grad_output.data(), opt, threads, ws);
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    if (call == 0) {
      for (size_t t = 0; t < p.shapes.size(); ++t) {
        expect_close(ours.weights[t], ref.weights[t], what + " weights t" + std::to_string(t));
        expect_close(ours.momentum[t], ref.momentum[t], what + " momentum t" + std::to_string(t));
      }
      ASSERT_TRUE(tbe_backward_update_ref(ref_batch, p.grad_output.data(), opt).ok());
    }
  }
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    expect_close(ours.weights[t], ref.weights[t], what + " 2nd call t" + std::to_string(t));
  }
  expect_state_sentinels(p, ours);
}

std::string describe(int dim, PoolingMode pooling, bool weighted, int threads) {
  return "dim " + std::to_string(dim) + (pooling == PoolingMode::kMean ? " mean" : " sum") +
         (weighted ? " weighted" : "") + " threads " + std::to_string(threads);
}

TEST(TbeForward, MatchesReferenceAcrossDims) {
  uint64_t seed = 11;
  for (int dim : kDims) {
    for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
      for (bool weighted : {false, true}) {
        if (weighted && pooling == PoolingMode::kMean) continue;
        const int64_t rows = dim == 1024 ? 50 : 300;
        const Problem p =
            make_problem({TableShape{rows, dim, 9, weighted, 0.15}}, 37, pooling, ++seed);
        for (int threads : {1, 2}) check_forward(p, threads, describe(dim, pooling, weighted, threads));
      }
    }
  }
}

TEST(TbeBackward, MatchesReferenceAcrossDimsAndOptimizers) {
  uint64_t seed = 101;
  for (int dim : kDims) {
    for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
      for (bool weighted : {false, true}) {
        if (weighted && pooling == PoolingMode::kMean) continue;
        const int64_t rows = dim == 1024 ? 40 : 200;
        const Problem p =
            make_problem({TableShape{rows, dim, 9, weighted, 0.15}}, 41, pooling, ++seed);
        for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kRowWiseAdagrad}) {
          OptimizerConfig opt;
          opt.type = type;
          opt.learning_rate = 0.05f;
          for (int threads : {1, 2}) {
            check_backward(p, opt, threads,
                           describe(dim, pooling, weighted, threads) +
                               (type == OptimizerType::kSgd ? " sgd" : " adagrad"));
          }
        }
      }
    }
  }
}

std::vector<TableShape> mixed_tables() {
  return {TableShape{1, 5, 4, false, 0.3},        TableShape{1000, 64, 20, true, 0.05},
          TableShape{70000, 16, 12, false, 0.2},   TableShape{3, 129, 6, true, 0.5},
          TableShape{5000, 128, 30, false, 0.0},   TableShape{2500, 32, 3, true, 0.9},
          TableShape{20, 1024, 2, false, 0.1}};
}

TEST(TbeFused, SeveralTablesInOneCall) {
  for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
    std::vector<TableShape> shapes = mixed_tables();
    if (pooling == PoolingMode::kMean) {
      for (TableShape& s : shapes) s.weighted = false;
    }
    const Problem p = make_problem(shapes, 333, pooling, 7);
    for (int threads : {1, 2, 3}) {
      check_forward(p, threads, "mixed forward");
      for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kRowWiseAdagrad}) {
        OptimizerConfig opt;
        opt.type = type;
        check_backward(p, opt, threads, "mixed backward");
      }
    }
  }
}

// Forward into a 64-byte aligned output with sentinels past its end.
void check_forward_aligned(const Problem& p, const std::string& what) {
  Problem::State state = p.initial_state();
  const FusedBatch batch = p.batch(state);
  const int64_t size = batch.batch_size * batch.total_dim();
  std::vector<float> want(size);
  ASSERT_TRUE(tbe_forward_ref(batch, want.data()).ok());
  constexpr int64_t kAlignFloats = 16;
  std::vector<float> storage(size + kSentinelCount + kAlignFloats, 777.0f);
  float* got = storage.data();
  while (reinterpret_cast<uintptr_t>(got) % 64 != 0) ++got;
  std::fill(got + size, got + size + kSentinelCount, kSentinel);
  for (int threads : {1, 2}) {
    ASSERT_TRUE(tbe_forward(batch, got, threads).ok()) << what;
    expect_sentinels(std::vector<float>(got, got + size + kSentinelCount), size);
    expect_close(std::vector<float>(got, got + size), want, what);
  }
}

// Outputs of 4 MiB and more whose lines are whole (64-byte aligned, dims and
// column offsets multiples of 16) take the streaming-store path.
TEST(TbeFused, LargeAlignedOutputMatchesReference) {
  std::vector<TableShape> shapes = {TableShape{3000, 128, 6, false, 0.1},
                                    TableShape{500, 16, 3, true, 0.1},
                                    TableShape{700, 17, 2, false, 0.1},  // misaligns the rest
                                    TableShape{900, 64, 4, false, 0.1}};
  check_forward_aligned(make_problem(shapes, 4096, PoolingMode::kSum, 17), "mixed columns");
  shapes.erase(shapes.begin() + 2);  // total_dim 208 = 13 x 16: every table streams
  check_forward_aligned(make_problem(shapes, 5000, PoolingMode::kSum, 18), "aligned columns");
  shapes[1].weighted = false;
  check_forward_aligned(make_problem(shapes, 5000, PoolingMode::kMean, 19), "aligned mean");
}

// Hot rows shared by many bags and threads: row 0 and repeats dominate.
TEST(TbeBackward, SkewedTablesManyThreads) {
  const Problem p = make_problem({TableShape{5, 33, 40, true, 0.0}, TableShape{3, 8, 40, false, 0.0}},
                                 200, PoolingMode::kSum, 29);
  for (int threads : {1, 2, 4}) {
    check_backward(p, OptimizerConfig{OptimizerType::kRowWiseAdagrad, 0.05f, 1e-8f}, threads,
                   "skewed");
  }
}

TEST(TbeFused, AllBagsEmptyGiveZerosAndNoUpdate) {
  std::vector<TableShape> shapes = {TableShape{10, 7, 0, false, 1.0},
                                    TableShape{10, 64, 5, false, 1.0}};
  const Problem p = make_problem(shapes, 16, PoolingMode::kMean, 3);
  Problem::State state = p.initial_state();
  const FusedBatch batch = p.batch(state);
  std::vector<float> out = make_output(16 * 71);
  ASSERT_TRUE(tbe_forward(batch, out.data(), 2).ok());
  for (int64_t i = 0; i < 16 * 71; ++i) ASSERT_EQ(out[i], 0.0f);
  expect_sentinels(out, 16 * 71);
  TbeWorkspace ws;
  OptimizerConfig opt{OptimizerType::kRowWiseAdagrad, 0.1f, 1e-8f};
  ASSERT_TRUE(tbe_backward_update(batch, p.grad_output.data(), opt, 2, ws).ok());
  EXPECT_EQ(state.weights, p.weights);
  EXPECT_EQ(state.momentum, p.momentum);
}

TEST(TbeFused, ZeroBatchAndNoTables) {
  const Problem p = make_problem({TableShape{10, 8, 3, false, 0.0}}, 0, PoolingMode::kSum, 4);
  Problem::State state = p.initial_state();
  std::vector<float> out = make_output(0);
  EXPECT_TRUE(tbe_forward(p.batch(state), out.data(), 2).ok());
  expect_sentinels(out, 0);
  TbeWorkspace ws;
  EXPECT_TRUE(tbe_backward_update(p.batch(state), nullptr, OptimizerConfig{}, 1, ws).ok());
  EXPECT_TRUE(tbe_forward(FusedBatch{}, out.data(), 1).ok());
}

TEST(TbeFused, SingleRowTablesSumEveryOccurrence) {
  const Problem p = make_problem({TableShape{1, 17, 12, true, 0.1}, TableShape{1, 3, 5, false, 0.0}},
                                 50, PoolingMode::kSum, 5);
  for (int threads : {1, 2}) {
    check_forward(p, threads, "single row");
    check_backward(p, OptimizerConfig{OptimizerType::kRowWiseAdagrad, 0.1f, 1e-8f}, threads,
                   "single row");
  }
}

TEST(TbeFused, TotalDimAndColumnOffsets) {
  FusedBatch b;
  b.tables.resize(3);
  b.tables[0].dim = 4;
  b.tables[1].dim = 17;
  b.tables[2].dim = 1;
  EXPECT_EQ(b.total_dim(), 22);
  EXPECT_EQ(b.column_offset(0), 0);
  EXPECT_EQ(b.column_offset(1), 4);
  EXPECT_EQ(b.column_offset(2), 21);
}

void expect_index_error(const Status& s, int table, int64_t position, int64_t value) {
  ASSERT_EQ(s.code, Status::Code::kIndexOutOfRange) << s.message();
  EXPECT_EQ(s.table, table);
  EXPECT_EQ(s.position, position);
  EXPECT_EQ(s.value, value);
  const std::string m = s.message();
  EXPECT_NE(m.find("table " + std::to_string(table)), std::string::npos) << m;
  EXPECT_NE(m.find("position " + std::to_string(position)), std::string::npos) << m;
  EXPECT_NE(m.find("value " + std::to_string(value)), std::string::npos) << m;
}

void check_bad_index(Problem p, int table, int64_t position, int64_t value) {
  p.indices[table].at(position) = value;
  for (int threads : {1, 2}) {
    Problem::State state = p.initial_state();
    const FusedBatch batch = p.batch(state);
    const int64_t size = batch.batch_size * batch.total_dim();
    std::vector<float> out = make_output(size);
    expect_index_error(tbe_forward(batch, out.data(), threads), table, position, value);
    expect_sentinels(out, size);
    expect_index_error(tbe_forward_ref(batch, out.data()), table, position, value);
    for (OptimizerType type : {OptimizerType::kSgd, OptimizerType::kRowWiseAdagrad}) {
      TbeWorkspace ws;
      const OptimizerConfig opt{type, 0.1f, 1e-8f};
      expect_index_error(tbe_backward_update(batch, p.grad_output.data(), opt, threads, ws),
                         table, position, value);
      expect_index_error(tbe_backward_update_ref(batch, p.grad_output.data(), opt), table,
                         position, value);
      ASSERT_EQ(state.weights, p.weights) << "weights written by a failed update";
      ASSERT_EQ(state.momentum, p.momentum) << "momentum written by a failed update";
    }
  }
}

TEST(TbeErrors, IndexTooLargeIsReportedAndNothingWritten) {
  const Problem p = make_problem(mixed_tables(), 64, PoolingMode::kSum, 9);
  const int64_t last = static_cast<int64_t>(p.indices[4].size()) - 1;
  check_bad_index(p, 4, last, p.shapes[4].rows);
  check_bad_index(p, 1, 3, 1000000007);
}

TEST(TbeErrors, NegativeIndexIsReported) {
  const Problem p = make_problem(mixed_tables(), 64, PoolingMode::kSum, 9);
  check_bad_index(p, 0, 0, -1);
  check_bad_index(p, 2, 100, -70000);
}

TEST(TbeErrors, FirstBadIndexInTableThenPositionOrder) {
  Problem p = make_problem(mixed_tables(), 64, PoolingMode::kSum, 9);
  p.indices[5].at(2) = -3;  // later table: not reported
  const int64_t late = static_cast<int64_t>(p.indices[2].size()) - 2;
  p.indices[2].at(late) = 1 << 20;  // in the second thread's half
  p.indices[2].at(1) = 70000;       // first: reported
  check_bad_index(p, 2, 1, 70000);
}

TEST(TbeErrors, MeanWithPerSampleWeightsIsInvalid) {
  Problem p = make_problem({TableShape{10, 8, 4, true, 0.0}}, 8, PoolingMode::kMean, 2);
  Problem::State state = p.initial_state();
  const FusedBatch batch = p.batch(state);
  std::vector<float> out = make_output(64);
  EXPECT_EQ(tbe_forward(batch, out.data(), 1).code, Status::Code::kInvalidArgument);
  EXPECT_EQ(tbe_forward_ref(batch, out.data()).code, Status::Code::kInvalidArgument);
  TbeWorkspace ws;
  const Status s = tbe_backward_update(batch, p.grad_output.data(), OptimizerConfig{}, 1, ws);
  EXPECT_EQ(s.code, Status::Code::kInvalidArgument);
  EXPECT_EQ(s.table, 0);
  EXPECT_NE(s.message().find("per_sample_weights"), std::string::npos) << s.message();
  EXPECT_EQ(state.weights, p.weights);
}

TEST(TbeErrors, BadOffsetsAndDimsAreInvalid) {
  Problem p = make_problem({TableShape{10, 8, 4, false, 0.0}}, 8, PoolingMode::kSum, 2);
  p.offsets[0][3] = p.offsets[0][2] - 1;
  Problem::State state = p.initial_state();
  std::vector<float> out = make_output(64);
  EXPECT_EQ(tbe_forward(p.batch(state), out.data(), 1).code, Status::Code::kInvalidArgument);
  FusedBatch b = p.batch(state);
  b.tables[0].dim = 1025;
  EXPECT_EQ(tbe_forward(b, out.data(), 1).code, Status::Code::kInvalidArgument);
  b.tables[0].dim = 8;
  b.tables[0].momentum = nullptr;
  TbeWorkspace ws;
  const OptimizerConfig adagrad{OptimizerType::kRowWiseAdagrad, 0.1f, 1e-8f};
  EXPECT_EQ(tbe_backward_update(b, p.grad_output.data(), adagrad, 1, ws).code,
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace embshard
