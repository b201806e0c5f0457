// data_root(): the environment variable, the file beside the binary (absolute
// and relative), an install's share/embshard, and the error naming each place
// tried. resolve_data_root takes the variable and the binary's folder as
// parameters, so no binary needs to move.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "embshard/cost/cost_model.h"
#include "embshard/util/data_dir.h"
#include "embshard/workload/stats.h"
#include "test_util.h"

namespace embshard {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::ScratchDir;

void make_root(const fs::path& root) { fs::create_directories(root / "models"); }

void write_text(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// Sets EMBSHARD_DATA_DIR for one test and puts the old value back.
class ScopedDataDirEnv {
 public:
  explicit ScopedDataDirEnv(const std::optional<std::string>& value) {
    if (const char* old = std::getenv(kDataDirEnv)) old_ = old;
    if (value) {
      ::setenv(kDataDirEnv, value->c_str(), 1);
    } else {
      ::unsetenv(kDataDirEnv);
    }
  }
  ~ScopedDataDirEnv() {
    if (old_) {
      ::setenv(kDataDirEnv, old_->c_str(), 1);
    } else {
      ::unsetenv(kDataDirEnv);
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST(DataDir, EnvironmentVariableWinsOverTheFileAndTheInstall) {
  ScratchDir dir("data_dir_env");
  make_root(dir.path() / "env_root");
  make_root(dir.path() / "file_root");
  make_root(dir.path() / "prefix/share/embshard");
  write_text(dir.path() / "prefix/bin" / kDataDirFile, (dir.path() / "file_root").string() + "\n");
  const std::string anchor = (dir.path() / "prefix/bin").string();
  EXPECT_EQ(resolve_data_root((dir.path() / "env_root/").string(), anchor),
            (dir.path() / "env_root").string());
  EXPECT_EQ(resolve_data_root("", anchor), (dir.path() / "file_root").string());
}

TEST(DataDir, BadEnvironmentVariableIsAnErrorNotAFallThrough) {
  ScratchDir dir("data_dir_bad_env");
  make_root(dir.path() / "prefix/share/embshard");
  fs::create_directories(dir.path() / "empty");
  const std::string anchor = (dir.path() / "prefix/bin").string();
  for (const std::string& bad : {(dir.path() / "missing").string(), (dir.path() / "empty").string()}) {
    const std::string message = error_of([&] { resolve_data_root(bad, anchor); });
    EXPECT_NE(message.find("EMBSHARD_DATA_DIR='" + bad + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("models/"), std::string::npos) << message;
    EXPECT_NE(message.find("unset it"), std::string::npos) << message;
  }
}

TEST(DataDir, FileBesideTheBinaryAbsoluteOrRelative) {
  ScratchDir dir("data_dir_file");
  make_root(dir.path() / "src");
  const fs::path build = dir.path() / "src/build";
  write_text(build / kDataDirFile, (dir.path() / "src").string() + "\n");
  EXPECT_EQ(resolve_data_root("", build.string()), (dir.path() / "src").string());
  // Relative to the file's folder, surrounding blanks and a CR ignored; only
  // the first line counts.
  write_text(build / kDataDirFile, "  ..\r\nignored\n");
  EXPECT_EQ(resolve_data_root("", build.string()), (dir.path() / "src").string());
  // An installed Python module's file points up at the install's data.
  make_root(dir.path() / "prefix/share/embshard");
  const fs::path module = dir.path() / "prefix/lib/python3/dist-packages/embshard";
  write_text(module / kDataDirFile, "../../../../share/embshard\n");
  EXPECT_EQ(resolve_data_root("", module.string()),
            (dir.path() / "prefix/share/embshard").string());
}

TEST(DataDir, InstallShareFolderWhenNoFile) {
  ScratchDir dir("data_dir_share");
  make_root(dir.path() / "prefix/share/embshard");
  fs::create_directories(dir.path() / "prefix/bin");
  EXPECT_EQ(resolve_data_root("", (dir.path() / "prefix/bin").string()),
            (dir.path() / "prefix/share/embshard").string());
  // A file naming a folder without models/ falls through to the install.
  write_text(dir.path() / "prefix/bin" / kDataDirFile, (dir.path() / "gone").string());
  EXPECT_EQ(resolve_data_root("", (dir.path() / "prefix/bin").string()),
            (dir.path() / "prefix/share/embshard").string());
}

TEST(DataDir, ErrorNamesEachPlaceTriedAndTheFixes) {
  ScratchDir dir("data_dir_error");
  const fs::path bin = dir.path() / "prefix/bin";
  fs::create_directories(bin);
  std::string message = error_of([&] { resolve_data_root("", bin.string()); });
  EXPECT_NE(message.find("found no embshard data root"), std::string::npos) << message;
  EXPECT_NE(message.find("EMBSHARD_DATA_DIR: not set"), std::string::npos) << message;
  EXPECT_NE(message.find((bin / kDataDirFile).string() + ": no such file"), std::string::npos)
      << message;
  EXPECT_NE(message.find((dir.path() / "prefix/share/embshard").string() + ": no such folder"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--model DIR"), std::string::npos) << message;

  write_text(bin / kDataDirFile, "../nowhere\n");
  message = error_of([&] { resolve_data_root("", bin.string()); });
  EXPECT_NE(message.find((bin / kDataDirFile).string() + " names " +
                         (dir.path() / "prefix/nowhere").string() + ": no such folder"),
            std::string::npos)
      << message;
  write_text(bin / kDataDirFile, "\n");
  message = error_of([&] { resolve_data_root("", bin.string()); });
  EXPECT_NE(message.find((bin / kDataDirFile).string() + ": empty"), std::string::npos) << message;

  message = error_of([&] { resolve_data_root("", ""); });
  EXPECT_NE(message.find("unknown on this system"), std::string::npos) << message;
}

TEST(DataDir, LibraryDirIsThisProgramsFolder) {
  // The library is linked statically into this test: its code lives in the
  // test executable, wherever the test is started from.
  const fs::path exe = fs::canonical("/proc/self/exe");
  EXPECT_EQ(library_dir(), exe.parent_path().string());
}

TEST(DataDir, BuildTreeFindsTheSourceCheckout) {
  // The build writes embshard-data-dir beside the test binaries, naming the
  // source root; nothing is compiled into the library.
  ScopedDataDirEnv unset(std::nullopt);
  const std::string source = fs::canonical(EMBSHARD_SOURCE_DIR).string();
  EXPECT_EQ(fs::canonical(data_root()).string(), source);
  EXPECT_EQ(fs::canonical(shipped_models_dir()).string(), source + "/models");
  EXPECT_EQ(fs::canonical(default_published_stats_dir()).string(), source + "/data/published");
}

TEST(DataDir, ShippedFoldersFollowTheEnvironmentVariable) {
  ScratchDir dir("data_dir_follow");
  make_root(dir.path());
  ScopedDataDirEnv set(dir.path().string());
  EXPECT_EQ(data_root(), dir.path().string());
  EXPECT_EQ(shipped_models_dir(), (dir.path() / "models").string());
  EXPECT_EQ(default_published_stats_dir(), (dir.path() / "data/published").string());
  ScopedDataDirEnv bad((dir.path() / "missing").string());
  EXPECT_NE(error_of([] { shipped_models_dir(); }).find("EMBSHARD_DATA_DIR"), std::string::npos);
}

}  // namespace
}  // namespace embshard
