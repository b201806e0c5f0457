#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>
#include <utility>

#include "embshard/cost/cost_data.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/record_file.h"
#include "embshard/util/text_table.h"
#include "embshard/workload/table.h"
#include "support/pt_writer.h"
#include "test_util.h"

namespace embshard {
namespace {

using nlohmann::json;
using testing::ScratchDir;
using testing::slurp;
using testing::spit;

// An output directory this made goes with an error, what it wrote inside
// included; kept, or one that was there, it stays.
TEST(OutputDirectoryGuard, TakesOnlyTheDirectoryItMadeAndNotKept) {
  ScratchDir dir("output_guard");
  const std::string made = dir.file("a/b");
  try {
    OutputDirectoryGuard guard(made);
    EXPECT_TRUE(std::filesystem::is_directory(made));
    spit(made + "/trace.bin", "partial");
    throw Error("failed part way");
  } catch (const Error&) {
  }
  EXPECT_FALSE(std::filesystem::exists(made));
  {
    OutputDirectoryGuard guard(made);
    spit(made + "/trace.bin", "whole");
    guard.keep();
  }
  EXPECT_EQ(slurp(made + "/trace.bin"), "whole");
  { OutputDirectoryGuard guard(made); }  // there before: left alone
  EXPECT_EQ(slurp(made + "/trace.bin"), "whole");
  spit(dir.file("file"), "x");
  EXPECT_NE(testing::error_of([&] { OutputDirectoryGuard guard(dir.file("file")); })
                .find("cannot create the directory '" + dir.file("file") + "'"),
            std::string::npos);
}

// An output written over a link replaces the file it points to and keeps the
// link; over a file, keeps that file's mode; into a pipe (a device such as
// /dev/null alike), writes into it and leaves no regular file in its place.
TEST(WriteFileAtomic, LinksModesAndPipes) {
  namespace fs = std::filesystem;
  ScratchDir dir("atomic_targets");
  const std::string target = dir.file("target.json"), link = dir.file("link.json");
  write_file_atomic(target, "old");
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(target, link);
  write_file_atomic(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target), "new");
  EXPECT_EQ(fs::status(target).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  write_file_atomic(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(temp_path_for(fifo)));
}

TEST(RecordFile, AppendsAndResumes) {
  ScratchDir dir("records");
  const std::string path = dir.file("r.jsonl");
  const json header{{"format", "x"}, {"seed", 1}};
  {
    RecordFile f(path, header, {"format", "seed"});
    EXPECT_TRUE(f.records().empty());
    f.append({{"sample", 0}});
    f.append({{"sample", 1}});
  }
  RecordFile again(path, header, {"format", "seed"});
  ASSERT_EQ(again.records().size(), 2u);
  EXPECT_EQ(again.records()[1]["sample"], 1);
  EXPECT_EQ(again.dropped_bytes(), 0u);
}

// Two writers of one file would interleave and duplicate records: the second
// is refused while the first has it open, and the file is left as it was.
TEST(RecordFile, OneWriterAtATime) {
  ScratchDir dir("records_lock");
  const std::string path = dir.file("r.jsonl");
  const json header{{"format", "x"}};
  {
    RecordFile first(path, header, {"format"});
    first.append({{"sample", 0}});
    // The check a command makes before its reference window says the same.
    EXPECT_EQ(testing::error_of([&] { check_not_being_written(path); })
                  .rfind(path + ": another process is writing this file", 0),
              0u);
    EXPECT_EQ(testing::error_of([&] { RecordFile second(path, header, {"format"}); })
                  .rfind(path + ": another process is writing this file (wait for it, or give "
                                "another output path)",
                         0),
              0u);
    first.append({{"sample", 1}});
  }
  EXPECT_EQ(slurp(path), "{\"format\":\"x\"}\n{\"sample\":0}\n{\"sample\":1}\n");
  EXPECT_NO_THROW(check_not_being_written(path));
  EXPECT_NO_THROW(check_not_being_written(dir.file("absent.jsonl")));
  EXPECT_EQ(RecordFile(path, header, {"format"}).records().size(), 2u);
  // An empty file (a crash before its header) gets the header.
  spit(path, "");
  EXPECT_FALSE(has_records(path));
  RecordFile(path, header, {"format"}).append({{"sample", 0}});
  EXPECT_EQ(slurp(path), "{\"format\":\"x\"}\n{\"sample\":0}\n");
  EXPECT_TRUE(has_records(path));
  // Not a regular file (a pipe, /dev/null): no lock, every process shares the node.
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  RecordFile a(fifo, header, {}), b(fifo, header, {});
}

// A header that cannot be written whole (here a file size limit) leaves no
// file behind that a later run would refuse as "not a records file".
TEST(RecordFile, AFailedHeaderLeavesNoFile) {
  ScratchDir dir("records_header_fails");
  const std::string path = dir.file("r.jsonl");
  const pid_t child = fork();
  if (child == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{100, 100};
    setrlimit(RLIMIT_FSIZE, &limit);
    try {
      RecordFile f(path, {{"format", std::string(500, 'x')}}, {});
      _exit(1);
    } catch (const Error&) {
      _exit(file_exists(path) ? 2 : 0);
    }
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(file_exists(path));
}

TEST(RecordFile, DropsTornLastLineOnly) {
  ScratchDir dir("records_torn");
  const std::string path = dir.file("r.jsonl");
  const json header{{"format", "x"}};
  spit(path, "{\"format\":\"x\"}\n{\"sample\":0}\n{\"sample\":1,\"ms\":0.");
  {
    RecordFile f(path, header, {"format"});
    ASSERT_EQ(f.records().size(), 1u);
    EXPECT_EQ(f.dropped_bytes(), std::string("{\"sample\":1,\"ms\":0.").size());
    f.append({{"sample", 1}});
  }
  EXPECT_EQ(slurp(path), "{\"format\":\"x\"}\n{\"sample\":0}\n{\"sample\":1}\n");
  // A complete but garbled last line (e.g. zeros after a power cut) is torn too.
  spit(path, "{\"format\":\"x\"}\n{\"sample\":0}\n\0\0\0\n");
  EXPECT_EQ(RecordFile(path, header, {"format"}).records().size(), 1u);
  // A first line that is no header is another file: refused, left as it was
  // (it was dropped as a torn header and the file written over).
  spit(path, "notes: keep these\n");
  EXPECT_NE(testing::error_of([&] { RecordFile h(path, header, {"format"}); })
                .find("line 1 is not a records header ('notes: keep these')"),
            std::string::npos);
  EXPECT_EQ(slurp(path), "notes: keep these\n");
}

TEST(RecordFile, CorruptMiddleLineAndHeaderMismatchAreErrors) {
  ScratchDir dir("records_bad");
  const std::string path = dir.file("r.jsonl");
  spit(path, "{\"format\":\"x\",\"seed\":1}\n{\"sample\":0\n{\"sample\":1}\n");
  EXPECT_THROW(RecordFile(path, json{{"format", "x"}, {"seed", 1}}, {"format"}), Error);
  spit(path, "{\"format\":\"x\",\"seed\":1}\n{\"sample\":0}\n");
  try {
    RecordFile f(path, json{{"format", "x"}, {"seed", 2}}, {"format", "seed"});
    FAIL() << "resumed with another seed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'seed'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), "{\"format\":\"x\",\"seed\":1}\n{\"sample\":0}\n");  // untouched
}

TEST(ReuseBins, MatchPublishedBinEdges) {
  EXPECT_EQ(reuse_bin(1), 0);
  EXPECT_EQ(reuse_bin(2), 1);
  EXPECT_EQ(reuse_bin(3), 2);
  EXPECT_EQ(reuse_bin(4), 2);
  EXPECT_EQ(reuse_bin(5), 3);
  EXPECT_EQ(reuse_bin(32768), 15);
  EXPECT_EQ(reuse_bin(32769), 16);
  EXPECT_EQ(reuse_bin(uint64_t{1} << 40), 16);
  for (int k = 0; k < kReuseBins; ++k) {
    EXPECT_EQ(reuse_bin(reuse_bin_lower(k)), k);
    if (k < kReuseBins - 1) {
      EXPECT_EQ(reuse_bin(reuse_bin_upper(k)), k);
    }
  }
  EXPECT_EQ(reuse_bin_label(0), "(0, 1]");
  EXPECT_EQ(reuse_bin_label(5), "(16, 32]");
  EXPECT_EQ(reuse_bin_label(16), "(32768+");
  ReuseHistogram a{}, b{};
  a[0] = 1;
  b[1] = 1;
  EXPECT_DOUBLE_EQ(total_variation(a, b), 1.0);
  EXPECT_DOUBLE_EQ(total_variation(a, a), 0.0);
}

TEST(RecordFile, ReadsGzipByContent) {
  ScratchDir dir("records_gzip");
  const std::string plain = dir.file("r.jsonl");
  spit(plain, "{\"format\":\"x\"}\n{\"sample\":0}\n{\"sample\":1}\n");
  testing::gzip_file(plain, dir.file("r.jsonl.gz"));
  testing::gzip_file(plain, dir.file("no_suffix"));  // by content, not by name
  for (const std::string name : {"r.jsonl.gz", "no_suffix"}) {
    json header;
    const std::vector<json> records = RecordFile::read_all(dir.file(name), &header, nullptr);
    EXPECT_EQ(header["format"], "x");
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[1]["sample"], 1);
  }
  EXPECT_EQ(read_file_gunzip(plain), slurp(plain));
  // Members one after another (cat a.gz b.gz) read as one file.
  spit(dir.file("tail"), "{\"sample\":2}\n");
  testing::gzip_file(dir.file("tail"), dir.file("tail.gz"));
  spit(dir.file("two.gz"), slurp(dir.file("r.jsonl.gz")) + slurp(dir.file("tail.gz")));
  EXPECT_EQ(read_file_gunzip(dir.file("two.gz")), slurp(plain) + "{\"sample\":2}\n");
}

TEST(RecordFile, BrokenGzipIsAnErrorNamingTheFile) {
  ScratchDir dir("records_gzip_bad");
  std::string text = "{\"format\":\"x\"}\n";
  for (int i = 0; i < 300; ++i) text += fmt::format("{{\"sample\":{},\"ms\":{}}}\n", i, 0.37 * i);
  spit(dir.file("r.jsonl"), text);
  testing::gzip_file(dir.file("r.jsonl"), dir.file("r.gz"));
  const std::string gz = slurp(dir.file("r.gz"));
  const auto message = [&](const std::string& bytes) {
    spit(dir.file("bad.gz"), bytes);
    const std::string m = testing::error_of([&] { read_file_gunzip(dir.file("bad.gz")); });
    EXPECT_NE(m.find(dir.file("bad.gz")), std::string::npos) << m;
    return m;
  };
  EXPECT_NE(message(gz.substr(0, gz.size() / 2)).find("truncated"), std::string::npos);
  EXPECT_NE(message(gz.substr(0, gz.size() - 4)).find("truncated"), std::string::npos);
  EXPECT_NE(message(gz.substr(0, 2)).find("truncated"), std::string::npos);
  std::string flipped = gz;
  for (size_t i = 20; i < 40; ++i) flipped[i] = static_cast<char>(~flipped[i]);
  EXPECT_NE(message(flipped).find("corrupted"), std::string::npos);
  EXPECT_NE(message(gz + "junk after the stream").find("corrupted"), std::string::npos);
  EXPECT_THROW(RecordFile::read_all(dir.file("bad.gz"), nullptr, nullptr), Error);
}

TEST(ReadFile, ADirectoryIsNamedAsOne) {
  ScratchDir dir("read_dir");
  EXPECT_NE(testing::error_of([&] { read_file(dir.path().string()); })
                .find("is a directory, not a file"),
            std::string::npos);
}

TEST(Outputs, OneFileHoweverSpeltIsRefusedAndAFileIsNoDirectory) {
  ScratchDir dir("outputs");
  const std::string here = std::filesystem::current_path().filename().string();
  for (const auto& [a, b] : {std::pair<std::string, std::string>{"a.json", "./a.json"},
                             {"a.json", "../" + here + "/a.json"},
                             {dir.file("x/../a.json"), dir.file("a.json")}}) {
    EXPECT_NE(testing::error_of([&] { check_distinct_outputs({{"--out", a}, {"--svg", b}}); })
                  .find("name the same file"),
              std::string::npos)
        << a << " " << b;
  }
  EXPECT_NO_THROW(check_distinct_outputs({{"--out", "a.json"}, {"--svg", "a.svg"}, {"--trace", ""}}));
  // A pipe's path (bash's <(...)) resolves to nothing: it stands as given.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string pipe_path = "/proc/self/fd/" + std::to_string(fds[0]);
  EXPECT_NO_THROW(check_distinct_outputs({{"--svg", "a.svg"}, {"the record file", pipe_path}}));
  EXPECT_EQ(resolved_path(pipe_path), std::filesystem::path(pipe_path));
  ::close(fds[0]);
  ::close(fds[1]);
  spit(dir.file("afile"), "x");
  EXPECT_NE(testing::error_of([&] { check_writable(dir.file("afile/x.json"), "--out"); })
                .find("is a file, not a directory"),
            std::string::npos);
  // As root, access() calls /proc writable; no file can be made there.
  for (const std::string& proc : {std::string("/proc/version"), std::string("/proc/x.json")}) {
    EXPECT_EQ(testing::error_of([&] { check_writable(proc, "--out"); })
                  .rfind("--out: cannot write '" + proc + "': no file can be made in directory "
                         "'/proc'", 0),
              0u)
        << proc;
  }
  EXPECT_NO_THROW(check_writable(dir.file("new.json"), "--out"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);  // afile
  // The path the user gave, not the temporary file beside it.
  const std::string missing =
      testing::error_of([&] { write_file_atomic(dir.file("nodir/x.json"), "{}"); });
  EXPECT_EQ(missing.rfind("cannot write '" + dir.file("nodir/x.json") +
                              "': directory '" + dir.file("nodir") + "' does not exist", 0),
            0u)
      << missing;
}

// A writer killed with SIGKILL leaves "<path>.tmp.<pid>": the next writer of
// the path removes it, and leaves a live writer's alone.
TEST(Outputs, StaleTemporaryFilesOfDeadWritersAreRemoved) {
  ScratchDir dir("stale_temps");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // a pid that no longer runs
  const std::string path = dir.file("trace.bin");
  const std::string dead = path + ".tmp." + std::to_string(child);
  const std::string mine = temp_path_for(path);
  const std::string other = dir.file("other.tmp.") + std::to_string(child);
  for (const std::string& f : {dead, mine, path + ".tmp.x1", other}) spit(f, "x");
  EXPECT_EQ(remove_stale_temp_files(path), 0);  // written just now: maybe another host's writer
  for (const std::string& f : {dead, mine, path + ".tmp.x1", other}) {
    std::filesystem::last_write_time(
        f, std::filesystem::file_time_type::clock::now() - std::chrono::hours(1));
  }
  EXPECT_EQ(remove_stale_temp_files(path), 1);
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(mine));
  EXPECT_TRUE(std::filesystem::exists(path + ".tmp.x1"));
  EXPECT_TRUE(std::filesystem::exists(other));
}

// train and fit check their output directory before minutes of work.
TEST(Outputs, ADirectoryToWriteIsCheckedFirst) {
  ScratchDir dir("output_dirs");
  spit(dir.file("afile"), "x");
  EXPECT_NO_THROW(check_writable_directory(dir.path().string(), "--out"));
  EXPECT_NO_THROW(check_writable_directory(dir.file("new/deeper"), "--out"));
  for (const std::string& bad : {dir.file("afile"), dir.file("afile/model")}) {
    const std::string e = testing::error_of([&] { check_writable_directory(bad, "train: --out"); });
    EXPECT_EQ(e.rfind("train: --out: cannot write the directory '" + bad + "': '" +
                          dir.file("afile") + "' is a file, not a directory",
                      0),
              0u)
        << e;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("new")));
  EXPECT_NE(testing::error_of([&] { check_writable_directory("/proc/model", "fit: --out"); })
                .find("nothing can be made in '/proc'"),
            std::string::npos);
}

// A plan or a tables.json given where records are read is named as what it
// is, not as a corrupted file.
TEST(RecordFile, AWholeJsonDocumentIsNamedAsOne) {
  ScratchDir dir("records_document");
  spit(dir.file("plan.json"), json{{"format", "embshard-plan"}, {"tables", {{"a", 1}}}}.dump(1));
  const std::string expected = ": a JSON document (format 'embshard-plan'), not a file of ";
  EXPECT_NE(testing::error_of([&] {
              RecordFile::read_all(dir.file("plan.json"), nullptr, nullptr);
            }).find(dir.file("plan.json") + expected + "records"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { load_compute_data(dir.file("plan.json")); })
                .find(dir.file("plan.json") + expected + "measurements"),
            std::string::npos);
  spit(dir.file("torn.jsonl"), "{\"format\": \n{\"sample\": 0}\n");  // not a document
  EXPECT_NE(testing::error_of([&] {
              RecordFile::read_all(dir.file("torn.jsonl"), nullptr, nullptr);
            }).find("line 1 is not a records header"),
            std::string::npos);
}

TEST(RecordFile, NeverAppendsToAGzipFile) {
  ScratchDir dir("records_gzip_append");
  spit(dir.file("r.jsonl"), "{\"format\":\"x\"}\n{\"sample\":0}\n");
  testing::gzip_file(dir.file("r.jsonl"), dir.file("r.jsonl.gz"));
  const std::string before = slurp(dir.file("r.jsonl.gz"));
  EXPECT_NE(testing::error_of([&] {
              RecordFile f(dir.file("r.jsonl.gz"), json{{"format", "x"}}, {"format"});
            }).find("is gzip-compressed"),
            std::string::npos);
  EXPECT_EQ(slurp(dir.file("r.jsonl.gz")), before);
}

TEST(TextTable, AlignsColumns) {
  // Numbers right-aligned; a column marked left-aligned keeps digit-led lists at its left.
  const struct {
    std::vector<std::string> header, row1, row2;
    bool second_left;
    std::string expected;
  } cases[] = {
      {{"name", "ms"}, {"a", "1.5"}, {"long name", "12.25"}, false,
       "name       ms\n----------------\na            1.5\nlong name  12.25\n"},
      {{"table", "shards"}, {"a", "2:16"}, {"b", "1:16[0:500] 0:16[500:1000]"}, true,
       "table  shards\n---------------------------------\na      2:16\n"
       "b      1:16[0:500] 0:16[500:1000]\n"},
  };
  for (const auto& c : cases) {
    TextTable t(c.header);
    if (c.second_left) t.align_left(1);
    t.add_row(c.row1);
    t.add_row(c.row2);
    EXPECT_EQ(t.render(), c.expected);
  }
}

}  // namespace
}  // namespace embshard
