// Every fuzz target over its seeds (tests/fuzz/corpus/<target>/) and the
// inputs of its past findings (tests/fuzz/regressions/<target>/), through the
// entry function libFuzzer calls: a finding fixed stays fixed in every build,
// gcc's included, without clang or libFuzzer.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "embshard/cost/neural/model_file.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/model_dirs.h"

namespace embshard::fuzz {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void throw_finding(const std::string& message) { throw Finding(message); }

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The file descriptors this process holds: a reader closes what it opened.
int open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (::readdir(dir) != nullptr) ++n;
  ::closedir(dir);
  return n;
}

// The files of one target: its seeds and its kept findings. Returns how many ran.
size_t replay(const Target& target, const char* kind) {
  const std::vector<fs::path> files = files_in(fs::path(EMBSHARD_FUZZ_DIR) / kind / target.name);
  for (const fs::path& file : files) {
    const std::string bytes = bytes_of(file);
    const int fds = open_fds();
    try {
      target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const Finding& f) {
      ADD_FAILURE() << target.name << ": " << file.string() << ": " << f.what();
    }
    EXPECT_EQ(open_fds(), fds) << target.name << ": " << file.string()
                               << ": file descriptors left open";
  }
  return files.size();
}

class FuzzRegressions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    set_finding_handler(throw_finding);
    // Readers that fall back on the shipped data find the checkout's.
    setenv("EMBSHARD_DATA_DIR", EMBSHARD_SOURCE_DIR, /*overwrite=*/0);
  }
};

TEST_F(FuzzRegressions, EveryTargetHasSeeds) {
  ASSERT_GE(targets().size(), 12u);
  for (const Target& target : targets()) {
    EXPECT_FALSE(files_in(fs::path(EMBSHARD_FUZZ_DIR) / "corpus" / target.name).empty())
        << target.name << " has no seed corpus";
    EXPECT_TRUE(fs::exists(fs::path(EMBSHARD_FUZZ_DIR) / "dict" / (target.name + ".dict")))
        << target.name << " has no dictionary";
  }
}

TEST_F(FuzzRegressions, SeedsReadCleanly) {
  size_t total = 0;
  for (const Target& target : targets()) total += replay(target, "corpus");
  EXPECT_GT(total, 0u);
}

TEST_F(FuzzRegressions, PastFindingsReadCleanly) {
  for (const Target& target : targets()) replay(target, "regressions");
}

const Target& target_named(const std::string& name) {
  for (const Target& t : targets()) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no fuzz target " + name);
}

// Nesting a hundred thousand deep, past what libFuzzer's -max_len lets a
// target reach: every JSON reader refuses it with an Error, where printing or
// copying the value once ended the process on a stack overflow.
TEST_F(FuzzRegressions, DeepNestingIsRefusedByEveryJsonReader) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"table_specs", R"({"batch_size": 4, "tables": [@]})"},
      {"calibration", R"({"format": "embshard-analytic-calibration", "version": 1, "machine": @})"},
      {"plan", R"({"format": "embshard-plan", "version": 1, "algorithm": @})"},
      {"tasks", R"({"format": @})"},
      {"records", "{\"format\": \"embshard-compute-costs\", \"version\": 2}\n{\"tables\": @}\n"},
      {"records", "{\"format\": @}\n"},
      {"eval_records", "{\"format\": \"embshard-eval\", \"algos\": @}\n"},
      {"model_manifest", R"({"format": "embshard-neural-cost-model", "version": 3, "networks": @})"},
      {"policy_manifest", R"({"format": "embshard-placement-policy", "version": 1, "policy": @})"},
  };
  for (const auto& [name, text] : inputs) {
    std::string input = text;
    input.replace(input.find('@'), 1, deep);
    try {
      target_named(name).run(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    } catch (const Finding& f) {
      ADD_FAILURE() << name << ": " << f.what();
    }
  }
}

// A manifest and a weight file that are each possible alone but wrong
// together (the directory targets fuzz one file at a time): a layer count of
// 2^32 - 1 against no sizes once wrapped to match and read past the list; a
// width of 2^32 - 1 on both sides once passed as -1 and sized a buffer by it.
TEST_F(FuzzRegressions, WeightFileAndManifestWrongTogether) {
  const auto weights = [](std::vector<uint32_t> words) {
    std::string bytes("ESNNWTS\0", 8);
    for (uint32_t w : words) bytes.append(reinterpret_cast<const char*>(&w), 4);
    const uint32_t crc = crc32_of(bytes.data(), bytes.size());
    bytes.append(reinterpret_cast<const char*>(&crc), 4);
    return bytes;
  };
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {nlohmann::json::array(), weights({1, 0xFFFFFFFFu, 2, 2, 0})},
      {{4294967295u, 1}, weights({1, 1, 0xFFFFFFFFu, 1, 0})},
  };
  for (const auto& [sizes, bytes] : cases) {
    const std::string dir = scratch_path("pair");
    save_neural_model(small_neural_model(), dir);
    const std::string manifest_path = dir + "/manifest.json";
    nlohmann::json manifest = nlohmann::json::parse(read_file(manifest_path));
    accept_any_weights(manifest["networks"]);
    manifest["networks"]["compute"]["table_mlp"]["sizes"] = sizes;
    write_file_atomic(manifest_path, manifest.dump());
    write_file_atomic(dir + "/compute_table.bin", bytes);
    std::string message;
    try {
      load_neural_model(dir);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("manifest.json: field '/networks/compute/table_mlp/sizes'"),
              std::string::npos)
        << message;
  }
}

// The rule itself: an error naming no file, or any other exception, is a finding.
TEST_F(FuzzRegressions, ExpectCleanTellsRefusalsFromFindings) {
  EXPECT_NO_THROW(expect_clean("ok", [] {}));
  EXPECT_NO_THROW(expect_clean("named", [] { throw Error(scratch_dir() + "/x: bad field"); }));
  EXPECT_THROW(expect_clean("unnamed", [] { throw Error("bad field"); }), Finding);
  EXPECT_THROW(expect_clean("other", [] { throw std::out_of_range("at"); }), Finding);
}

}  // namespace
}  // namespace embshard::fuzz
