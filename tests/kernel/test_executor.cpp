#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "embshard/kernel/executor.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

struct SmallShard {
  std::vector<int64_t> offsets, indices;
  ShardInput input;
  explicit SmallShard(int dim) {
    const int64_t batch = 64, rows = 1000;
    offsets.push_back(0);
    for (int64_t b = 0; b < batch; ++b) {
      for (int k = 0; k < 1 + b % 5; ++k) indices.push_back((b * 37 + k * 11) % rows);
      offsets.push_back(static_cast<int64_t>(indices.size()));
    }
    input.batch_size = batch;
    input.tables.push_back({rows, dim, offsets.data(), indices.data()});
    input.tables.push_back({rows, 2 * dim, offsets.data(), indices.data()});
  }
};

TEST(Executor, RegistryNamesAndErrors) {
  ASSERT_FALSE(executor_names().empty());
  EXPECT_EQ(executor_names().front(), "cpu");
  EXPECT_EQ(create_executor("cpu")->name(), "cpu (1 thread)");
  ExecutorOptions two;
  two.threads = 2;
  EXPECT_EQ(create_executor("cpu", two)->name(), "cpu (2 threads)");
  try {
    create_executor("tpu");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
  }
  ExecutorOptions none;
  none.threads = 0;
  EXPECT_THROW(create_executor("cpu", none), Error);
}

TEST(Executor, CpuStepsTimeForwardAndBackward) {
  SmallShard s(16);
  auto shard = create_executor("cpu")->prepare(s.input);
  for (int i = 0; i < 3; ++i) {
    const StepTiming t = shard->step();
    EXPECT_TRUE(std::isfinite(t.fwd_ms) && t.fwd_ms > 0);
    EXPECT_TRUE(std::isfinite(t.bwd_ms) && t.bwd_ms > 0);
    EXPECT_DOUBLE_EQ(t.total_ms(), t.fwd_ms + t.bwd_ms);
  }
}

TEST(Executor, CpuStepsHalfTablesAndAdamAndRefusesQuantizedOnes) {
  for (DataType type : {DataType::kFp16, DataType::kBf16}) {
    for (OptimizerType optimizer : {OptimizerType::kRowWiseAdagrad, OptimizerType::kAdam}) {
      SmallShard s(16);
      s.input.tables[1].data_type = type;
      s.input.optimizer = optimizer;
      auto shard = create_executor("cpu")->prepare(s.input);
      const StepTiming t = shard->step();
      EXPECT_TRUE(t.fwd_ms > 0 && t.bwd_ms > 0) << data_type_name(type);
    }
  }
  SmallShard s(16);
  s.input.tables[0].data_type = DataType::kInt8;
  try {
    create_executor("cpu")->prepare(s.input);
    FAIL() << "an int8 table was prepared for training";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("table 0 of the shard is int8"), std::string::npos)
        << e.what();
  }
}

// Inference: the forward alone, quantized tables too (int8 at dim 1 and 2,
// whose stored rows are longer than their fp32 rows, among them).
TEST(Executor, CpuForwardOnlyStepsQuantizedTables) {
  for (int dim : {1, 2, 16}) {
    for (DataType type : {DataType::kFp32, DataType::kFp16, DataType::kInt8, DataType::kInt4}) {
      SmallShard s(dim);
      s.input.forward_only = true;
      s.input.tables[0].data_type = type;
      s.input.tables[1].data_type = DataType::kInt8;
      auto shard = create_executor("cpu")->prepare(s.input);
      for (int i = 0; i < 2; ++i) {
        const StepTiming t = shard->step();
        EXPECT_GT(t.fwd_ms, 0) << data_type_name(type) << " dim " << dim;
        EXPECT_EQ(t.bwd_ms, 0) << data_type_name(type) << " dim " << dim;
      }
    }
  }
}

TEST(Executor, CpuThreadTimeIsNamedOneThreadOnlyAndWithinTheWallClock) {
  ExecutorOptions o;
  o.thread_cpu_time = true;
  const auto cpu = create_executor("cpu", o);
  EXPECT_EQ(cpu->name(), "cpu (1 thread, thread CPU time)");
  SmallShard s(64);
  auto shard = cpu->prepare(s.input);
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const StepTiming t = shard->step();
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(std::isfinite(t.fwd_ms) && t.fwd_ms >= 0 && t.bwd_ms >= 0 && t.total_ms() > 0);
    // The thread cannot have run for longer than the wall clock went on
    // (a microsecond for the clocks' own granularity).
    EXPECT_LE(t.total_ms(), wall_ms + 1e-3);
  }
  o.threads = 2;
  try {
    create_executor("cpu", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 thread, not 2"), std::string::npos) << e.what();
  }
  o.threads = 1;
  EXPECT_THROW(create_executor("cuda", o), Error);  // built with CUDA or not
}

TEST(Executor, CpuRejectsInvalidShards) {
  auto cpu = create_executor("cpu");
  SmallShard bad_dim(16);
  bad_dim.input.tables[0].dim = 0;
  EXPECT_THROW(cpu->prepare(bad_dim.input), Error);
  SmallShard out_of_range(16);
  out_of_range.indices[5] = 5000;  // table 0 has 1000 rows
  auto shard = cpu->prepare(out_of_range.input);
  try {
    shard->step();
    FAIL() << "an index outside its table was executed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace embshard
