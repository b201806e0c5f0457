// import_pt against files written by libtorch itself (torch::pickle_save, the
// format Python's torch.load reads), and libtorch reading what the test-only
// writer (support/pt_writer.h) produces in Python's layout and with ZIP64.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "embshard/workload/import.h"
#include "support/import_check.h"
#include "support/pt_fixture_data.h"
#include "support/pt_writer.h"

namespace embshard {
namespace {

namespace fs = std::filesystem;
using testing::DlrmBatch;

torch::Tensor to_tensor(const std::vector<int64_t>& v, std::vector<int64_t> sizes,
                        torch::ScalarType dtype) {
  const torch::Tensor t = v.empty() ? torch::empty({0}, torch::kInt64)
                                    : torch::tensor(torch::ArrayRef<int64_t>(v), torch::kInt64);
  return t.reshape(sizes).to(dtype).contiguous();
}

// Writes the batch as torch.save would: a pickled tuple (indices, offsets, lengths).
void save_with_torch(const DlrmBatch& d, bool index_int32, bool gzip, const std::string& path) {
  const auto indices = to_tensor(d.indices, {static_cast<int64_t>(d.indices.size())},
                                 index_int32 ? torch::kInt32 : torch::kInt64);
  const auto offsets = to_tensor(d.offsets, {static_cast<int64_t>(d.offsets.size())},
                                 torch::kInt64);
  const auto lengths = to_tensor(d.lengths, {d.tables, d.batch}, torch::kInt64);
  const std::vector<char> bytes =
      torch::pickle_save(c10::ivalue::Tuple::create({indices, offsets, lengths}));
  if (gzip) {
    gzFile out = gzopen(path.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(out), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
}

class PtTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("embshard_pt_torch_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PtTorchTest, ImportsWhatLibtorchWrites) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {2, 3}, {3, 4}, {5, 17}, {8, 64}};
  uint64_t seed = 1;
  for (auto [tables, batch] : shapes) {
    for (bool int32 : {false, true}) {
      for (bool gzip : {false, true}) {
        SCOPED_TRACE(fmt::format("T={} B={} int32={} gzip={}", tables, batch, int32, gzip));
        const DlrmBatch d = testing::make_dlrm_batch(tables, batch, seed++);
        const std::string pt = (dir_ / "in.pt").string();
        save_with_torch(d, int32, gzip, pt);
        const std::string out = (dir_ / "out").string();
        ImportOptions options;
        options.dim = 16;
        const Workload w = import_pt(pt, out, options);
        EXPECT_EQ(w.dir, out);
        testing::expect_workload_matches(out, d, 16);
        TraceReader reader((fs::path(out) / kTraceFile).string());
        EXPECT_EQ(reader.info().index_bytes, int32 ? 4u : 8u);
        fs::remove_all(out);
      }
    }
  }
}

TEST_F(PtTorchTest, IndexBytesOption) {
  const DlrmBatch d = testing::make_dlrm_batch(3, 9, 42);
  const std::string pt = (dir_ / "in.pt").string();
  save_with_torch(d, /*index_int32=*/false, /*gzip=*/false, pt);
  ImportOptions options;
  options.index_bytes = 4;
  import_pt(pt, (dir_ / "narrow").string(), options);
  testing::expect_workload_matches((dir_ / "narrow").string(), d);
  EXPECT_EQ(TraceReader((dir_ / "narrow" / kTraceFile).string()).info().index_bytes, 4u);
}

// libtorch (miniz) must read what the test-only writer produces, in every
// variant: data descriptors or sizes in the local header, ZIP64 or not.
TEST_F(PtTorchTest, LibtorchLoadsTheTestWriter) {
  const DlrmBatch d = testing::make_dlrm_batch(4, 10, 7);
  for (bool zip64 : {false, true}) {
    for (bool descriptor : {false, true}) {
      for (bool int32 : {false, true}) {
        SCOPED_TRACE(fmt::format("zip64={} descriptor={} int32={}", zip64, descriptor, int32));
        const std::string pt = (dir_ / "written.pt").string();
        testing::PtWriteOptions options;
        options.zip64 = zip64;
        options.data_descriptor = descriptor;
        testing::write_pt_tuple(pt, testing::batch_tensors(d, int32), options);
        std::ifstream in(pt, std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
        const c10::IValue value = torch::pickle_load(bytes);
        ASSERT_TRUE(value.isTuple());
        const auto& items = value.toTupleRef().elements();
        ASSERT_EQ(items.size(), 3u);
        const torch::Tensor indices = items[0].toTensor(), offsets = items[1].toTensor(),
                            lengths = items[2].toTensor();
        EXPECT_EQ(indices.scalar_type(), int32 ? torch::kInt32 : torch::kInt64);
        EXPECT_TRUE(torch::equal(indices.to(torch::kInt64),
                                 to_tensor(d.indices, {(int64_t)d.indices.size()}, torch::kInt64)));
        EXPECT_TRUE(torch::equal(offsets, to_tensor(d.offsets, {(int64_t)d.offsets.size()},
                                                    torch::kInt64)));
        EXPECT_TRUE(torch::equal(lengths, to_tensor(d.lengths, {d.tables, d.batch},
                                                    torch::kInt64)));
        const std::string out = (dir_ / "out").string();
        import_pt(pt, out);
        testing::expect_workload_matches(out, d);
        fs::remove_all(out);
      }
    }
  }
}

// Writes the committed fixtures of tests/data/pt (see its README.md) when
// EMBSHARD_WRITE_PT_FIXTURES names a directory; skipped otherwise.
TEST(PtFixtures, Write) {
  const char* target = std::getenv("EMBSHARD_WRITE_PT_FIXTURES");
  if (target == nullptr) GTEST_SKIP() << "set EMBSHARD_WRITE_PT_FIXTURES=<dir> to write them";
  fs::create_directories(target);
  save_with_torch(testing::make_dlrm_batch(3, 4, 1), false, false,
                  (fs::path(target) / "small_int64.pt").string());
  save_with_torch(testing::make_dlrm_batch(4, 3, 2), true, true,
                  (fs::path(target) / "small_int32.pt.gz").string());
}

}  // namespace
}  // namespace embshard
