// Data types in the TBE kernels: the conversions against hand-worked values
// and the hardware's, quantized rows, the optimized kernels against the
// scalar reference for every type (fp16, bf16 trained; int8, int4 forward),
// Adam, and fp16 / bf16 training against fp32 over 100 steps.
#include <gtest/gtest.h>

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "embshard/kernel/precision.h"
#include "embshard/kernel/tbe.h"
#include "embshard/util/error.h"
#include "kernel/tbe_test_util.h"

namespace embshard {
namespace {

using testing::make_problem;
using testing::Problem;
using testing::TableShape;

constexpr uint8_t kSentinelByte = 0xa5;
constexpr int64_t kSentinelBytes = 61;
const DataType kAllTypes[] = {DataType::kFp16, DataType::kBf16, DataType::kInt8, DataType::kInt4};

float bits_to_float(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(Precision, HalvesRoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan16 = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (!nan16) EXPECT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << h;
    const bool nan_bf = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
    if (!nan_bf) EXPECT_EQ(fp32_to_bf16(bf16_to_fp32(static_cast<uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bffu);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bffu);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00u);         // the tie above the largest: infinity
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00u);  // tie: to the even 1.0
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02u);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001u);  // the smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000u);  // half of it: a tie, to even 0
  EXPECT_EQ(fp32_to_fp16(-1.5f * 0x1p-25f), 0x8001u);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000u);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80u);  // tie: to the even 1.0
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82u);
  EXPECT_EQ(fp32_to_bf16(bits_to_float(0x7f7fffffu)), 0x7f80u);  // rounds up to infinity
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
#if defined(__F16C__)
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {  // random bit patterns, the hardware's rounding
    const float x = bits_to_float(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    ASSERT_EQ(fp32_to_fp16(x), _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)) << x;
  }
#endif
}

TEST(Precision, StochasticRoundingIsUnbiasedBetweenTheTwoNeighbours) {
  for (DataType type : {DataType::kFp16, DataType::kBf16}) {
    const float ulp = type == DataType::kFp16 ? 0x1p-10f : 0x1p-7f;
    for (float x : {1.0f + 0.3f * ulp, -(1.0f + 0.8f * ulp), 0.3f * 0x1p-24f}) {
      const float below = std::fabs(x) < 1e-6f ? 0.0f : std::copysign(1.0f, x);
      const float above = std::fabs(x) < 1e-6f ? 0x1p-24f : std::copysign(1.0f + ulp, x);
      if (type == DataType::kBf16 && std::fabs(x) < 1e-6f) continue;  // normal in bf16
      double sum = 0;
      constexpr int kDraws = 20000;
      for (int i = 0; i < kDraws; ++i) {
        const float r =
            half_to_fp32(type, round_half(type, x, true, rounding_random(3, i, 0, 0, 0)));
        ASSERT_TRUE(r == below || r == above) << x << " -> " << r;
        sum += r;
      }
      EXPECT_NEAR(sum / kDraws, x, 0.02 * std::fabs(above - below)) << data_type_name(type);
    }
    EXPECT_EQ(round_half(type, 1.0f, true, 0xffffffffu), round_half(type, 1.0f, false, 0));
  }
}

TEST(Precision, PackingOverItsOwnInputGivesTheSameBytes) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> value(-3.0f, 2.0f);
  for (DataType type : kAllTypes) {
    std::vector<float> rows(4 * 9);
    for (float& x : rows) x = value(rng);
    std::vector<uint8_t> apart(4 * data_type_row_bytes(type, 9));
    pack_rows(type, rows.data(), 4, 9, apart.data());
    pack_rows(type, rows.data(), 4, 9, rows.data());
    EXPECT_EQ(std::memcmp(rows.data(), apart.data(), apart.size()), 0) << data_type_name(type);
  }
  // An int8 row of one value (9 bytes) is longer than its fp32 row: refused.
  std::vector<float> one(4, 1.0f);
  EXPECT_THROW(pack_rows(DataType::kInt8, one.data(), 4, 1, one.data()), Error);
}

TEST(Precision, QuantizedRowsOfOddValues) {
  const float inf = std::numeric_limits<float>::infinity();
  for (DataType type : {DataType::kInt8, DataType::kInt4}) {
    const std::vector<float> row = {1.0f, inf, 2.0f, -inf, NAN, 1.5f};
    std::vector<uint8_t> q(data_type_row_bytes(type, 6));
    std::vector<float> back(6);
    quantize_row(type, row.data(), 6, q.data());
    dequantize_row(type, q.data(), 6, back.data());
    for (float v : back) EXPECT_TRUE(std::isfinite(v)) << data_type_name(type);
    EXPECT_NEAR(back[0], 1.0f, 0.04f) << data_type_name(type);
    EXPECT_NEAR(back[2], 2.0f, 0.04f);
    EXPECT_FLOAT_EQ(back[1], back[2]);  // +inf at the top, -inf and NaN at the bottom
    EXPECT_FLOAT_EQ(back[3], back[0]);
    EXPECT_FLOAT_EQ(back[4], back[0]);
  }
  // Far from zero, int4's fp16 bias: the codes count from the bias it keeps.
  const std::vector<float> offset = {1000.3f, 1000.31f, 1000.305f};
  std::vector<uint8_t> q(data_type_row_bytes(DataType::kInt4, 3));
  std::vector<float> back(3);
  quantize_row(DataType::kInt4, offset.data(), 3, q.data());
  dequantize_row(DataType::kInt4, q.data(), 3, back.data());
  for (int d = 0; d < 3; ++d) EXPECT_NEAR(back[d], offset[d], 0.5f);  // fp16's step at 1000
}

TEST(Precision, QuantizedRowsReadBackWithinHalfAStep) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> value(-3.0f, 2.0f);
  for (DataType type : {DataType::kInt8, DataType::kInt4}) {
    for (int dim : {1, 2, 3, 7, 8, 64, 129}) {
      std::vector<float> row(dim), back(dim);
      for (float& x : row) x = value(rng);
      std::vector<uint8_t> q(data_type_row_bytes(type, dim) + kSentinelBytes, kSentinelByte);
      quantize_row(type, row.data(), dim, q.data());
      for (int64_t i = data_type_row_bytes(type, dim); i < static_cast<int64_t>(q.size()); ++i) {
        ASSERT_EQ(q[i], kSentinelByte) << "wrote past the row";
      }
      dequantize_row(type, q.data(), dim, back.data());
      const float lo = *std::min_element(row.begin(), row.end());
      const float hi = *std::max_element(row.begin(), row.end());
      const float step = (hi - lo) / (type == DataType::kInt8 ? 255 : 15);
      // int4 keeps its scale and bias in fp16: their rounding on top.
      const float slack = type == DataType::kInt8 ? 1e-5f : 4e-3f * (std::fabs(lo) + std::fabs(hi));
      for (int d = 0; d < dim; ++d) {
        EXPECT_NEAR(back[d], row[d], step / 2 + slack) << data_type_name(type) << " dim " << dim;
      }
    }
    const std::vector<float> flat(5, 0.25f);  // one value: scale 1, exact
    std::vector<float> back(5);
    std::vector<uint8_t> q(data_type_row_bytes(type, 5));
    quantize_row(type, flat.data(), 5, q.data());
    dequantize_row(type, q.data(), 5, back.data());
    EXPECT_EQ(back, flat);
  }
}

// A problem's tables stored as `type`, with sentinel bytes past each.
struct Stored {
  std::vector<std::vector<uint8_t>> packed;
  std::vector<std::vector<float>> weights, momentum, exp_avg, exp_avg_sq;
};

Stored store(const Problem& p, DataType type) {
  Stored s;
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    const TableShape& shape = p.shapes[t];
    const int64_t bytes = shape.rows * data_type_row_bytes(type, shape.dim);
    s.packed.emplace_back(bytes + kSentinelBytes, kSentinelByte);
    pack_rows(type, p.weights[t].data(), shape.rows, shape.dim, s.packed.back().data());
    s.weights.push_back(p.weights[t]);
    s.momentum.push_back(p.momentum[t]);
    s.exp_avg.emplace_back(p.weights[t].size(), 0.0f);
    s.exp_avg_sq.emplace_back(p.weights[t].size(), 0.0f);
  }
  return s;
}

FusedBatch bind(const Problem& p, DataType type, Stored& s) {
  Problem::State unused{s.weights, s.momentum};
  FusedBatch b = p.batch(unused);
  for (size_t t = 0; t < b.tables.size(); ++t) {
    TableBatch& tb = b.tables[t];
    tb.type = type;
    tb.weights = type == DataType::kFp32 ? s.weights[t].data() : nullptr;
    tb.packed = type == DataType::kFp32 ? nullptr : s.packed[t].data();
    tb.momentum = s.momentum[t].data();
    tb.exp_avg = s.exp_avg[t].data();
    tb.exp_avg_sq = s.exp_avg_sq[t].data();
  }
  return b;
}

void expect_packed_sentinels(const Problem& p, DataType type, const Stored& s) {
  for (size_t t = 0; t < p.shapes.size(); ++t) {
    const int64_t bytes = p.shapes[t].rows * data_type_row_bytes(type, p.shapes[t].dim);
    for (int64_t i = bytes; i < bytes + kSentinelBytes; ++i) {
      ASSERT_EQ(s.packed[t][i], kSentinelByte) << "wrote past table " << t;
    }
  }
}

TEST(TbeTypes, ForwardMatchesTheReferenceForEveryType) {
  uint64_t seed = 300;
  for (DataType type : kAllTypes) {
    for (int dim : {1, 3, 8, 16, 17, 64, 129, 1024}) {
      for (PoolingMode pooling : {PoolingMode::kSum, PoolingMode::kMean}) {
        const bool weighted = pooling == PoolingMode::kSum && dim % 2 == 1;
        const Problem p = make_problem({TableShape{dim == 1024 ? 40 : 250, dim, 9, weighted, 0.15},
                                        TableShape{30, 8, 3, false, 0.3}},
                                       37, pooling, ++seed);
        Stored s = store(p, type);
        const FusedBatch batch = bind(p, type, s);
        const int64_t size = batch.batch_size * batch.total_dim();
        std::vector<float> want(size), got(size + 5, -1.0f);
        ASSERT_TRUE(tbe_forward_ref(batch, want.data()).ok());
        for (int threads : {1, 2}) {
          const Status st = tbe_forward(batch, got.data(), threads);
          ASSERT_TRUE(st.ok()) << st.message();
          const std::string what = data_type_name(type) + " dim " + std::to_string(dim);
          for (int64_t i = 0; i < size; ++i) {
            ASSERT_NEAR(got[i], want[i], 1e-5f + 1e-5f * std::fabs(want[i])) << what << " " << i;
          }
          for (int64_t i = size; i < size + 5; ++i) ASSERT_EQ(got[i], -1.0f) << what;
        }
        expect_packed_sentinels(p, type, s);
      }
    }
  }
}

TEST(TbeTypes, QuantizedTablesAreForwardOnly) {
  const Problem p = make_problem({TableShape{50, 8, 4, false, 0.1}}, 9, PoolingMode::kSum, 1);
  for (DataType type : {DataType::kInt8, DataType::kInt4}) {
    Stored s = store(p, type);
    const FusedBatch batch = bind(p, type, s);
    const std::vector<uint8_t> before = s.packed[0];
    TbeWorkspace ws;
    const Status st = tbe_backward_update(batch, p.grad_output.data(), OptimizerConfig{}, 1, ws);
    EXPECT_EQ(st.code, Status::Code::kInvalidArgument);
    EXPECT_NE(st.message().find("forward-only"), std::string::npos) << st.message();
    EXPECT_FALSE(tbe_backward_update_ref(batch, p.grad_output.data(), OptimizerConfig{}).ok());
    EXPECT_EQ(s.packed[0], before);
  }
}

// The optimized backward against the reference: the same fp32 arithmetic in
// the same order, so the stored halves agree bit for bit.
TEST(TbeTypes, BackwardMatchesTheReferenceForHalvesAndAdam) {
  uint64_t seed = 500;
  for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kBf16}) {
    for (OptimizerType optimizer :
         {OptimizerType::kSgd, OptimizerType::kRowWiseAdagrad, OptimizerType::kAdam}) {
      for (bool stochastic : {false, true}) {
        if (stochastic && type == DataType::kFp32) continue;
        const Problem p =
            make_problem({TableShape{300, 16, 9, true, 0.1}, TableShape{40, 129, 5, false, 0.2},
                          TableShape{1, 8, 3, false, 0.0}},
                         53, PoolingMode::kSum, ++seed);
        OptimizerConfig opt;
        opt.type = optimizer;
        opt.learning_rate = 0.05f;
        opt.stochastic_rounding = stochastic;
        opt.seed = seed;
        Stored ref = store(p, type), ours = store(p, type);
        const FusedBatch ref_batch = bind(p, type, ref), our_batch = bind(p, type, ours);
        TbeWorkspace ws;
        for (int64_t step = 1; step <= 3; ++step) {  // Adam's bias correction moves
          opt.step = step;
          ASSERT_TRUE(tbe_backward_update_ref(ref_batch, p.grad_output.data(), opt).ok());
          const Status st = tbe_backward_update(our_batch, p.grad_output.data(), opt, 2, ws);
          ASSERT_TRUE(st.ok()) << st.message();
        }
        const std::string what = data_type_name(type) + " optimizer " +
                                 std::to_string(static_cast<int>(optimizer)) +
                                 (stochastic ? " stochastic" : "");
        for (size_t t = 0; t < p.shapes.size(); ++t) {
          if (type == DataType::kFp32) {
            EXPECT_EQ(ours.weights[t], ref.weights[t]) << what;
          } else {
            EXPECT_EQ(ours.packed[t], ref.packed[t]) << what << " table " << t;
          }
          EXPECT_EQ(ours.momentum[t], ref.momentum[t]) << what;
          EXPECT_EQ(ours.exp_avg[t], ref.exp_avg[t]) << what;
          EXPECT_EQ(ours.exp_avg_sq[t], ref.exp_avg_sq[t]) << what;
        }
        expect_packed_sentinels(p, type, ours);
      }
    }
  }
}

double train(const std::vector<const Problem*>& batches, DataType type, OptimizerConfig opt,
             Stored& s) {
  TbeWorkspace ws;
  for (size_t step = 0; step < batches.size(); ++step) {
    const Problem& p = *batches[step];
    const FusedBatch batch = bind(p, type, s);
    std::vector<float> out(p.batch_size * batch.total_dim());
    if (!tbe_forward(batch, out.data(), 1).ok()) return -1;
    opt.step = static_cast<int64_t>(step) + 1;
    if (!tbe_backward_update(batch, p.grad_output.data(), opt, 1, ws).ok()) return -1;
  }
  return 0;
}

// Trains `type` and fp32 from the same initial values (the first batch's
// weights as `type` holds them) on the same batches (row-wise Adagrad):
// mean |difference| over mean |fp32 weight| after the last.
double drift_from_fp32(const std::vector<const Problem*>& batches, DataType type, bool stochastic) {
  OptimizerConfig opt;
  opt.type = OptimizerType::kRowWiseAdagrad;
  opt.learning_rate = 0.02f;
  opt.seed = 4;
  Problem start = *batches[0];
  for (size_t t = 0; t < start.shapes.size(); ++t) {
    const TableShape& shape = start.shapes[t];
    std::vector<uint8_t> packed(shape.rows * data_type_row_bytes(type, shape.dim));
    pack_rows(type, start.weights[t].data(), shape.rows, shape.dim, packed.data());
    unpack_rows(type, packed.data(), shape.rows, shape.dim, start.weights[t].data());
  }
  Stored fp32 = store(start, DataType::kFp32), half = store(start, type);
  if (train(batches, DataType::kFp32, opt, fp32) != 0) return -1;
  opt.stochastic_rounding = stochastic;
  if (train(batches, type, opt, half) != 0) return -1;
  double diff = 0, norm = 0;
  for (size_t t = 0; t < start.shapes.size(); ++t) {
    const TableShape& shape = start.shapes[t];
    std::vector<float> w(start.weights[t].size());
    unpack_rows(type, half.packed[t].data(), shape.rows, shape.dim, w.data());
    for (size_t i = 0; i < w.size(); ++i) {
      diff += std::fabs(w[i] - fp32.weights[t][i]);
      norm += std::fabs(fp32.weights[t][i]);
    }
  }
  const double relative = diff / norm;
  std::printf("%s%s: %.3f%% from fp32 after %zu steps\n", data_type_name(type).c_str(),
              stochastic ? " (stochastic rounding)" : "", 100 * relative, batches.size());
  return relative;
}

const std::vector<TableShape> kTrainedTables = {TableShape{2000, 64, 20, false, 0.05},
                                                TableShape{500, 32, 8, true, 0.1}};

// The bar: after 100 steps on 100 random batches, the same for every type,
// fp16 weights stay within 0.2% and bf16 within 1% of fp32's (rounded to
// nearest even, the default).
TEST(TbeTypes, HalfPrecisionTrainingStaysCloseToFp32) {
  std::vector<Problem> problems;
  std::vector<const Problem*> batches;
  for (uint64_t step = 0; step < 100; ++step) {
    problems.push_back(make_problem(kTrainedTables, 256, PoolingMode::kSum, 1000 + step));
  }
  for (const Problem& p : problems) batches.push_back(&p);
  const double fp16 = drift_from_fp32(batches, DataType::kFp16, false);
  const double bf16 = drift_from_fp32(batches, DataType::kBf16, false);
  EXPECT_GE(fp16, 0);
  EXPECT_LT(fp16, 0.002);
  EXPECT_GE(bf16, 0);
  EXPECT_LT(bf16, 0.01);
  // Stochastic rounding adds variance where updates are random: printed.
  drift_from_fp32(batches, DataType::kFp16, true);
  drift_from_fp32(batches, DataType::kBf16, true);
}

// One batch 100 times: every update pushes the same way and many are under
// half a bf16 step, which rounding to nearest drops; stochastic rounding
// keeps them in expectation.
TEST(TbeTypes, StochasticRoundingKeepsUpdatesUnderHalfAStep) {
  const Problem p = make_problem(kTrainedTables, 256, PoolingMode::kSum, 77);
  const std::vector<const Problem*> batches(100, &p);
  const double nearest = drift_from_fp32(batches, DataType::kBf16, false);
  const double stochastic = drift_from_fp32(batches, DataType::kBf16, true);
  EXPECT_GE(stochastic, 0);
  EXPECT_LT(stochastic, nearest / 2);
}

}  // namespace
}  // namespace embshard
