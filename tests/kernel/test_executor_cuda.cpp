// The CUDA executor behind the Executor interface (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "embshard/measure/shard_timer.h"
#include "embshard/kernel/executor.h"
#include "embshard/kernel/tbe_cuda.h"
#include "embshard/util/error.h"

namespace embshard {
namespace {

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    std::string why;                                                        \
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

TEST(CudaExecutor, NamedByTheRegistryAndStepsTimeBothPasses) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(executor_names().back(), "cuda");
  auto cuda = create_executor("cuda");
  EXPECT_NE(cuda->name().find(cuda_device_name()), std::string::npos) << cuda->name();
  std::vector<int64_t> offsets{0}, indices;
  for (int64_t b = 0; b < 512; ++b) {
    for (int k = 0; k < 1 + b % 9; ++k) indices.push_back((b * 131 + k * 17) % 5000);
    offsets.push_back(static_cast<int64_t>(indices.size()));
  }
  ShardInput in;
  in.batch_size = 512;
  in.tables.push_back({5000, 64, offsets.data(), indices.data()});
  in.tables.push_back({5000, 12, offsets.data(), indices.data()});
  auto shard = cuda->prepare(in);
  for (int i = 0; i < 3; ++i) {
    const StepTiming t = shard->step();
    EXPECT_TRUE(std::isfinite(t.fwd_ms) && t.fwd_ms > 0);
    EXPECT_TRUE(std::isfinite(t.bwd_ms) && t.bwd_ms > 0);
  }
  indices[3] = 5000;  // outside table 0: refused when prepared, naming the value
  try {
    cuda->prepare(in);
    FAIL() << "an out-of-range index was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("5000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace embshard
