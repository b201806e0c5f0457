#include "embshard/workload/import.h"
#include "embshard/workload/stats.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "embshard/util/error.h"
#include "embshard/util/reporter.h"
#include "embshard/util/file.h"
#include "workload/pt_reader.h"

namespace embshard {
namespace {

namespace fs = std::filesystem;
using pt::DType;
using pt::TensorInfo;

// Per-table statistics of one batch: rows, pooling factor, unique rows and the
// two reuse histograms. Self-contained so that a general statistics module
// can replace it.
TableSpec table_spec_from_trace(const TableTrace& trace, std::string name, int dim) {
  TableSpec spec;
  spec.name = std::move(name);
  spec.dim = dim;
  spec.rows = trace.indices.empty()
                  ? 1
                  : *std::max_element(trace.indices.begin(), trace.indices.end()) + 1;
  fill_table_spec(compute_table_stats(trace, spec.rows, spec.name), spec);
  return spec;
}

// Bytes read so far, to the reporter at most once every two seconds.
class ReadProgress {
 public:
  ReadProgress(const std::string& path, const ImportOptions& options)
      : file_bytes_(file_size_bytes(path)),
        reporter_(options.reporter),
        enabled_(reporter_ != nullptr && file_bytes_ >= options.progress_min_bytes) {}

  void operator()(uint64_t bytes_done) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    reporter_->note(fmt::format("embshard import: {:.2f} GiB read (file {:.2f} GiB), {:.0f} MiB/s, "
                                "{:.0f} s",
                                bytes_done / 1073741824.0, file_bytes_ / 1073741824.0,
                                bytes_done / 1048576.0 / std::max(seconds, 1e-9), seconds));
  }

 private:
  using Clock = std::chrono::steady_clock;
  uint64_t file_bytes_;
  Reporter* reporter_;
  bool enabled_;
  Clock::time_point start_ = Clock::now(), last_ = Clock::now();
};

struct Layout {
  TensorInfo indices, offsets, lengths;
  int64_t tables = 0, batch = 0;
};

Layout check_layout(pt::PtArchive& archive) {
  const std::string& path = archive.path();
  const std::vector<TensorInfo> t = archive.tuple_of_tensors(3);
  Layout l{t[0], t[1], t[2]};
  ES_CHECK(l.indices.sizes.size() == 1, "'{}': indices has {} dimensions, expected 1", path,
           l.indices.sizes.size());
  ES_CHECK(l.offsets.sizes.size() == 1, "'{}': offsets has {} dimensions, expected 1", path,
           l.offsets.sizes.size());
  ES_CHECK(l.lengths.sizes.size() == 2, "'{}': lengths has {} dimensions, expected 2 (tables, "
           "batch size)", path, l.lengths.sizes.size());
  l.tables = l.lengths.sizes[0];
  l.batch = l.lengths.sizes[1];
  ES_CHECK(l.tables > 0 && l.batch > 0, "'{}': lengths has shape ({}, {}): need at least one "
           "table and one sample", path, l.tables, l.batch);
  ES_CHECK(l.offsets.sizes[0] - 1 == l.tables * l.batch, "'{}': offsets has {} entries, expected "
           "T*B+1 = {} for lengths of shape ({}, {})", path, l.offsets.sizes[0],
           l.tables * l.batch + 1, l.tables, l.batch);
  return l;
}

std::vector<int64_t> read_offsets(pt::PtArchive& archive, const Layout& l) {
  const std::string& path = archive.path();
  std::vector<int64_t> offsets = archive.read_tensor(l.offsets, "offsets");
  ES_CHECK(offsets[0] == 0, "'{}': offsets[0] is {}, must be 0", path, offsets[0]);
  for (size_t i = 1; i < offsets.size(); ++i) {
    ES_CHECK(offsets[i] >= offsets[i - 1], "'{}': offsets decrease at offsets[{}] = {} < "
             "offsets[{}] = {} (table {}, bag {})", path, i, offsets[i], i - 1, offsets[i - 1],
             (i - 1) / l.batch, (i - 1) % l.batch);
  }
  ES_CHECK(offsets.back() == l.indices.sizes[0], "'{}': last offset offsets[{}] is {}, must equal "
           "the number of indices {}", path, offsets.size() - 1, offsets.back(),
           l.indices.sizes[0]);
  return offsets;
}

// lengths is only checked, in chunks, against the differences of offsets.
void check_lengths(pt::PtArchive& archive, const Layout& l, const std::vector<int64_t>& offsets) {
  auto stream = archive.stream_tensor(l.lengths, "lengths");
  std::vector<int64_t> chunk(std::min<uint64_t>(stream->remaining(), 1 << 20));
  for (uint64_t i = 0; stream->remaining() > 0;) {
    const uint64_t count = std::min<uint64_t>(stream->remaining(), chunk.size());
    stream->read(chunk.data(), count);
    for (uint64_t k = 0; k < count; ++k, ++i) {
      const int64_t expected = offsets[i + 1] - offsets[i];
      ES_CHECK(chunk[k] == expected, "'{}': lengths[{}][{}] is {}, but offsets[{}] - offsets[{}] "
               "= {}", archive.path(), i / l.batch, i % l.batch, chunk[k], i + 1, i, expected);
    }
  }
  stream->finish();
}

// Streams the indices table by table into the trace writer; returns the specs.
std::vector<TableSpec> convert_tables(pt::PtArchive& archive, const Layout& l,
                                      const std::vector<int64_t>& offsets, TraceWriter& writer,
                                      int dim, uint32_t index_bytes) {
  const int64_t max_index =
      index_bytes == 4 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  auto stream = archive.stream_tensor(l.indices, "indices");
  std::vector<TableSpec> specs;
  TableTrace trace;
  for (int64_t t = 0; t < l.tables; ++t) {
    const int64_t begin = offsets[t * l.batch];
    trace.offsets.resize(l.batch + 1);
    for (int64_t b = 0; b <= l.batch; ++b) trace.offsets[b] = offsets[t * l.batch + b] - begin;
    trace.indices.resize(trace.offsets.back());
    stream->read(trace.indices.data(), trace.indices.size());
    for (size_t i = 0; i < trace.indices.size(); ++i) {
      ES_CHECK(trace.indices[i] >= 0 && trace.indices[i] <= max_index,
               "'{}': indices[{}] = {} (table {}) is {}", archive.path(),
               begin + static_cast<int64_t>(i), trace.indices[i], t,
               trace.indices[i] < 0 ? "negative" : "too large for --index-bytes 4");
    }
    specs.push_back(table_spec_from_trace(trace, fmt::format("t{}", t), dim));
    writer.add_table(trace);
  }
  stream->finish();
  return specs;
}

}  // namespace

Workload import_pt(const std::string& pt_path, const std::string& out_dir,
                   const ImportOptions& options) {
  ES_CHECK(options.dim >= 1 && options.dim <= 1024, "import: dim is {}, must be in 1..1024",
           options.dim);
  ES_CHECK(options.index_bytes == 0 || options.index_bytes == 4 || options.index_bytes == 8,
           "import: index_bytes is {}, must be 4 or 8", options.index_bytes);
  ES_CHECK(file_exists(pt_path), "cannot open '{}': no such file", pt_path);
  ES_CHECK(!fs::exists(out_dir) || fs::is_directory(out_dir),
           "import: output '{}' exists and is not a directory", out_dir);
  // Everything is written into a staging directory inside out_dir and moved
  // into place only once the whole input has been read and checked.
  const fs::path staging = fs::path(out_dir) / fmt::format(".import.{}", getpid());
  try {
    ReadProgress progress(pt_path, options);
    pt::PtArchive archive(pt_path, [&progress](uint64_t done) { progress(done); });
    const Layout layout = check_layout(archive);
    const std::vector<int64_t> offsets = read_offsets(archive, layout);
    check_lengths(archive, layout, offsets);

    // out_dir, if made here, goes again with an error or a signal; a signal
    // takes the staging directory too (its files are guarded).
    OutputDirectoryGuard directory(out_dir);
    std::error_code ec;
    fs::create_directories(staging, ec);
    ES_CHECK(!ec, "import: cannot create '{}': {}", staging.string(), ec.message());
    const TempFileGuard staging_guard(staging.string(), /*directory=*/true);
    Workload w;
    w.source = pt_path;
    w.batch_size = layout.batch;
    w.trace_file = kTraceFile;
    {
      const uint32_t index_bytes = options.index_bytes != 0
                                       ? options.index_bytes
                                       : static_cast<uint32_t>(dtype_bytes(layout.indices.dtype));
      TraceWriter writer((staging / kTraceFile).string(), layout.tables, layout.batch,
                         index_bytes);
      w.tables = convert_tables(archive, layout, offsets, writer, options.dim, index_bytes);
      writer.finish();
    }
    save_workload_specs(w, staging.string());
    for (const char* name : {kTraceFile, kTablesFile}) {
      fs::rename(staging / name, fs::path(out_dir) / name, ec);
      ES_CHECK(!ec, "import: cannot move '{}' into '{}': {}", (staging / name).string(), out_dir,
               ec.message());
    }
    fs::remove(staging, ec);
    directory.keep();
    w.dir = out_dir;
    return w;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
}

}  // namespace embshard
