// The torch.save reader and import_pt without libtorch: committed fixtures
// written by libtorch (tests/data/pt), files in Python's layout from the
// test-only writer (ZIP64 included), and corrupted variants of them, each of
// which must give an embshard::Error naming the file, never a crash or hang.
// Also run under AddressSanitizer + UBSan.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/workload/import.h"
#include "support/import_check.h"
#include "support/pt_fixture_data.h"
#include "support/pt_writer.h"
#include "workload/pt_pickle.h"
#include "workload/pt_reader.h"

namespace embshard {
namespace {

namespace fs = std::filesystem;
using testing::DlrmBatch;
using testing::PtTensorSpec;

const std::string kFixtures = std::string(EMBSHARD_TEST_DATA_DIR) + "/pt";

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class PtReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("embshard_pt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Imports `pt` into a fresh directory and expects an Error whose message
  // names the file and contains `needle`; the directory must not be left.
  void expect_import_error(const std::string& pt, const std::string& needle) {
    const std::string out = path("out_failed");
    try {
      import_pt(pt, out);
      ADD_FAILURE() << "import of " << pt << " succeeded, expected an error with '" << needle
                    << "'";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(pt), std::string::npos) << message;
      EXPECT_NE(message.find(needle), std::string::npos) << message;
    }
    EXPECT_FALSE(fs::exists(out)) << "failed import left " << out;
  }

  std::string write_batch(const std::string& name, const std::vector<PtTensorSpec>& tensors,
                          testing::PtWriteOptions options = {}) {
    testing::write_pt_tuple(path(name), tensors, options);
    return path(name);
  }

  fs::path dir_;
};

TEST_F(PtReaderTest, ImportsCommittedLibtorchFixtures) {
  import_pt(kFixtures + "/small_int64.pt", path("a"));
  testing::expect_workload_matches(path("a"), testing::make_dlrm_batch(3, 4, 1));
  EXPECT_EQ(TraceReader(path("a/trace.bin")).info().index_bytes, 8u);
  import_pt(kFixtures + "/small_int32.pt.gz", path("b"));
  testing::expect_workload_matches(path("b"), testing::make_dlrm_batch(4, 3, 2));
  EXPECT_EQ(TraceReader(path("b/trace.bin")).info().index_bytes, 4u);
}

TEST_F(PtReaderTest, ImportsPythonLayoutZip64AndGzip) {
  const DlrmBatch d = testing::make_dlrm_batch(6, 11, 3);
  for (bool zip64 : {false, true}) {
    for (bool descriptor : {false, true}) {
      for (bool int32 : {false, true}) {
        for (bool gzip : {false, true}) {
          SCOPED_TRACE(fmt::format("zip64={} descriptor={} int32={} gzip={}", zip64, descriptor,
                                   int32, gzip));
          testing::PtWriteOptions options;
          options.zip64 = zip64;
          options.data_descriptor = descriptor;
          options.archive = "dlrm_batch";
          std::string pt = write_batch("in.pt", testing::batch_tensors(d, int32), options);
          if (gzip) {
            testing::gzip_file(pt, path("in.pt.gz"));
            pt = path("in.pt.gz");
          }
          import_pt(pt, path("out"));
          testing::expect_workload_matches(path("out"), d);
          fs::remove_all(path("out"));
        }
      }
    }
  }
}

TEST_F(PtReaderTest, Zip64FieldsAreRead) {
  // Every size and offset of this file is 0xFFFFFFFF in the 32-bit fields.
  testing::PtWriteOptions options;
  options.zip64 = true;
  options.data_descriptor = false;
  const DlrmBatch d = testing::make_dlrm_batch(2, 5, 9);
  const std::string pt = write_batch("z64.pt", testing::batch_tensors(d, false), options);
  const std::string bytes = read_file(pt);
  uint32_t local_size;
  std::memcpy(&local_size, bytes.data() + 22, 4);
  EXPECT_EQ(local_size, 0xFFFFFFFFu);
  pt::PtArchive archive(pt);
  ASSERT_EQ(archive.entries().size(), 6u);
  EXPECT_EQ(archive.entries()[2].name, "archive/data/0");
  EXPECT_EQ(archive.entries()[2].size_bytes, d.indices.size() * 8);
  const auto tensors = archive.tuple_of_tensors(3);
  EXPECT_EQ(archive.read_tensor(tensors[1], "offsets"), d.offsets);
}

TEST_F(PtReaderTest, RejectsWhatIsNotATorchFile) {
  write_bytes(path("text.pt"), "hello, this is not a zip archive at all");
  expect_import_error(path("text.pt"), "not a torch.save file");
  write_bytes(path("empty.pt"), "");
  expect_import_error(path("empty.pt"), "not a torch.save file");
  write_bytes(path("text.txt"), "plain text");
  testing::gzip_file(path("text.txt"), path("text.pt.gz"));
  expect_import_error(path("text.pt.gz"), "content is not a zip archive");
  expect_import_error(path("missing.pt"), "no such file");
}

TEST_F(PtReaderTest, RejectsBadTensors) {
  const DlrmBatch d = testing::make_dlrm_batch(3, 4, 5);
  auto tensors = [&] { return testing::batch_tensors(d, false); };
  auto with_values = [&](int which, std::vector<int64_t>* storage, auto edit) {
    auto t = tensors();
    const std::vector<int64_t>& src = which == 0 ? d.indices : which == 1 ? d.offsets : d.lengths;
    *storage = src;
    edit(*storage);
    t[which] = testing::tensor_spec(*storage, t[which].sizes, false);
    return t;
  };
  std::vector<int64_t> v;
  expect_import_error(write_batch("o0.pt", with_values(1, &v, [](auto& o) { o[0] = 1; })),
                      "offsets[0] is 1");
  expect_import_error(write_batch("odec.pt", with_values(1, &v, [](auto& o) { o[5] = o[4] - 1; })),
                      "offsets decrease at offsets[5]");
  expect_import_error(write_batch("olast.pt", with_values(1, &v, [](auto& o) { o.back() += 1; })),
                      "last offset offsets[12]");
  expect_import_error(write_batch("len.pt", with_values(2, &v, [](auto& l) { l[6] += 1; })),
                      "lengths[1][2]");
  expect_import_error(write_batch("neg.pt", with_values(0, &v, [](auto& i) { i[3] = -4; })),
                      "indices[3] = -4 (table 0) is negative");
  const std::string wide =
      write_batch("wide.pt", with_values(0, &v, [](auto& i) { i[2] = int64_t{1} << 33; }));
  ImportOptions narrow;
  narrow.index_bytes = 4;
  try {
    import_pt(wide, path("narrow"), narrow);
    ADD_FAILURE() << "an index of 2^33 imported with index_bytes 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(wide + "': indices[2] = 8589934592 (table 0) is too "
                                         "large for --index-bytes 4"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(path("narrow")));

  auto t = tensors();
  t[0].storage_type = "FloatStorage";
  expect_import_error(write_batch("float.pt", t), "storage type torch.FloatStorage");
  t = tensors();
  t.pop_back();
  expect_import_error(write_batch("pair.pt", t), "expected a tuple of 3 tensors");
  t = tensors();
  t[2].strides = {1, 3};
  expect_import_error(write_batch("strided.pt", t), "not contiguous");
  t = tensors();
  t[2].sizes = {2, 6};
  t[1].sizes = {12};
  expect_import_error(write_batch("short.pt", t), "offsets has 12 entries, expected T*B+1 = 13");
  t = tensors();
  t[2].sizes = {12};
  expect_import_error(write_batch("flat.pt", t), "lengths has 1 dimensions");
}

TEST_F(PtReaderTest, RejectsBadPickles) {
  const DlrmBatch d = testing::make_dlrm_batch(2, 3, 6);
  const auto tensors = testing::batch_tensors(d, false);
  testing::PtWriteOptions options;
  options.pickle_override = std::string("\x80\x02I12\n.", 7);
  expect_import_error(write_batch("int.pt", tensors, options), "opcode INT (0x49) at byte 2");
  options.pickle_override = std::string("\x80\x02K\x05", 4);
  expect_import_error(write_batch("nostop.pt", tensors, options), "no STOP opcode");
  options.pickle_override = std::string("\x80\x02J\x01\x02", 5);
  expect_import_error(write_batch("short.pt", tensors, options), "BININT (0x4a) at byte 2");
  options.pickle_override = std::string("\x80\x02t.", 4);
  expect_import_error(write_batch("mark.pt", tensors, options), "no MARK");
  options.pickle_override = std::string("\x80\x02h\x07.", 5);
  expect_import_error(write_batch("memo.pt", tensors, options), "memo key 7");
  // A storage key that names no record.
  std::string pickle = testing::pt_tuple_pickle(tensors);
  const std::string key2 = std::string("X\x01\x00\x00\x00" "2", 6);
  pickle.replace(pickle.find(key2), key2.size(), std::string("X\x01\x00\x00\x00" "9", 6));
  options.pickle_override = pickle;
  expect_import_error(write_batch("key.pt", tensors, options), "no record 'archive/data/9'");
}

// Every strict prefix of a file is rejected.
TEST_F(PtReaderTest, RejectsEveryTruncation) {
  const DlrmBatch d = testing::make_dlrm_batch(2, 3, 8);
  const std::string python = write_batch("py.pt", testing::batch_tensors(d, true));
  testing::gzip_file(kFixtures + "/small_int64.pt", path("small.pt.gz"));
  for (const std::string& source : {kFixtures + "/small_int64.pt", python, path("small.pt.gz"),
                                    kFixtures + "/small_int32.pt.gz"}) {
    const std::string bytes = read_file(source);
    for (size_t n = 0; n < bytes.size(); ++n) {
      SCOPED_TRACE(fmt::format("{} cut to {} of {} bytes", source, n, bytes.size()));
      write_bytes(path("cut.pt"), bytes.substr(0, n));
      expect_import_error(path("cut.pt"), "");
    }
  }
}

// A flipped byte is rejected, or lies where it cannot change the result
// (padding, timestamps, version fields the reader does not need): then the
// import must give exactly the original workload.
TEST_F(PtReaderTest, FlippedBytesAreRejectedOrHarmless) {
  const DlrmBatch d = testing::make_dlrm_batch(2, 3, 4);
  const std::string python = write_batch("py.pt", testing::batch_tensors(d, false));
  for (const std::string& source : {kFixtures + "/small_int64.pt", python,
                                    kFixtures + "/small_int32.pt.gz"}) {
    import_pt(source, path("good"));
    const std::string good_trace = read_file(path("good/trace.bin"));
    const std::string bytes = read_file(source);
    size_t rejected = 0;
    for (size_t k = 0; k < bytes.size(); ++k) {
      SCOPED_TRACE(fmt::format("{} with byte {} flipped", source, k));
      std::string bad = bytes;
      bad[k] = static_cast<char>(bad[k] ^ 0xFF);
      write_bytes(path("flip.pt"), bad);
      try {
        import_pt(path("flip.pt"), path("flip_out"));
        EXPECT_EQ(read_file(path("flip_out/trace.bin")), good_trace);
        fs::remove_all(path("flip_out"));
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(path("flip.pt")), std::string::npos) << e.what();
        EXPECT_FALSE(fs::exists(path("flip_out")));
        ++rejected;
      }
    }
    std::printf("%s: %zu of %zu flipped bytes rejected, the rest harmless\n", source.c_str(),
                rejected, bytes.size());
    // Data, pickle, directory and CRCs cover most of these small files.
    EXPECT_GT(rejected, bytes.size() * 6 / 10) << source;
    fs::remove_all(path("good"));
  }
}

TEST_F(PtReaderTest, FailedImportLeavesAnExistingDirectoryAlone) {
  fs::create_directories(path("ws"));
  write_bytes(path("ws/tables.json"), "old specs");
  write_bytes(path("ws/trace.bin"), "old trace");
  const DlrmBatch d = testing::make_dlrm_batch(2, 3, 5);
  auto t = testing::batch_tensors(d, false);
  std::vector<int64_t> bad = d.indices;
  bad.back() = -1;
  t[0] = testing::tensor_spec(bad, t[0].sizes, false);
  EXPECT_THROW(import_pt(write_batch("neg.pt", t), path("ws")), Error);
  EXPECT_EQ(read_file(path("ws/tables.json")), "old specs");
  EXPECT_EQ(read_file(path("ws/trace.bin")), "old trace");
  EXPECT_EQ(std::distance(fs::directory_iterator(path("ws")), fs::directory_iterator()), 2);
  // One it made goes again.
  EXPECT_THROW(import_pt(path("neg.pt"), path("made")), Error);
  EXPECT_FALSE(fs::exists(path("made")));
  // A good import replaces both files.
  import_pt(write_batch("good.pt", testing::batch_tensors(d, false)), path("ws"));
  testing::expect_workload_matches(path("ws"), d);
  EXPECT_EQ(std::distance(fs::directory_iterator(path("ws")), fs::directory_iterator()), 2);
}

TEST(PtPickle, ReadsTheSupportedOpcodes) {
  using namespace std::string_literals;
  // A dict built with every supported opcode family; hand-assembled.
  std::string p = "\x80\x04\x95"s + "\x40\x00\x00\x00\x00\x00\x00\x00"s;  // PROTO 4, FRAME
  p += "}\x94("s;                                             // EMPTY_DICT MEMOIZE MARK
  p += "\x8c\x01" "a"s;                                       // SHORT_BINUNICODE 'a'
  p += "\x8a\x02\x00\xff"s;                                   // LONG1 -256
  p += "\x8d\x01\x00\x00\x00\x00\x00\x00\x00" "b"s;           // BINUNICODE8 'b'
  p += "G\x3f\xf8\x00\x00\x00\x00\x00\x00"s;                  // BINFLOAT 1.5
  p += "U\x01" "c" "]\x94(K\x01M\x00\x01" "e"s;               // 'c': [1, 256] via APPENDS
  p += "T\x01\x00\x00\x00" "d"s;                              // BINSTRING 'd'
  p += "\x8c\x03" "mod\x94\x8c\x04" "Name\x94\x93)\x81"s;     // STACK_GLOBAL, NEWOBJ
  p += "N\x88\x86" "b"s;                                      // BUILD (None, True)
  p += "u"s;                                                  // SETITEMS
  p += "r\x05\x00\x00\x00j\x05\x00\x00\x00"s;                 // LONG_BINPUT, LONG_BINGET
  p += "\x86."s;                                              // TUPLE2 STOP
  const pt::Pickle pickle = pt::parse_pickle(p, "test");
  const pt::PyValue& root = *pickle.root;
  ASSERT_TRUE(root.is(pt::PyValue::Kind::kTuple));
  ASSERT_EQ(root.items[0], root.items[1]);  // the memo shares the value
  const pt::PyValue& dict = *root.items[0];
  ASSERT_EQ(dict.items.size(), 8u);
  EXPECT_EQ(dict.items[1]->i, -256);
  EXPECT_EQ(dict.items[2]->s, "b");
  EXPECT_EQ(dict.items[3]->f, 1.5);
  EXPECT_EQ(dict.items[5]->items.size(), 2u);
  EXPECT_EQ(dict.items[5]->items[1]->i, 256);
  EXPECT_EQ(dict.items[7]->items[0]->s, "mod.Name");
  EXPECT_EQ(dict.items[7]->items.size(), 3u);  // callable, args, state
  EXPECT_EQ(pt::describe(dict).substr(0, 11), "{'a', -256,");
}

TEST(PtPickle, SurvivesCyclesAndNamesBadOpcodes) {
  using namespace std::string_literals;
  // l = []; l.append(l): a cycle through the memo must neither leak nor loop.
  const pt::Pickle pickle = pt::parse_pickle("\x80\x02]q\x00h\x00" "a."s, "cyc");
  EXPECT_EQ(pickle.root->items[0], pickle.root);
  EXPECT_FALSE(pt::describe(*pickle.root).empty());
  try {
    pt::parse_pickle("\x80\x02K\x01\x01"s, "ctx");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ctx: pickle opcode unknown (0x01) at byte 4"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace embshard
