// The FBGEMM peer of `bench kernel`: fbgemm_gpu's CPU table-batched
// embedding, run by python/embshard/fbgemm_peer.py in a Python process
// under torchrec_python(). The process lives as long as the peer and is
// driven call by call (JSON lines over two FIFOs in a scratch directory;
// the module's docstring has the protocol and file formats), so that its
// calls interleave with ours in every round. It times its own calls (after
// evicting the caches in its own process), so the exchange is not counted.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "embshard/bench/kernel_bench.h"
#include "embshard/util/error.h"
#include "embshard/util/file.h"
#include "embshard/util/python_peer.h"

namespace embshard {
namespace {
namespace fs = std::filesystem;

constexpr const char* kModule = "embshard.fbgemm_peer";
constexpr const char* kCaseFiles[] = {".json", ".weights.f32", ".offsets.i64", ".indices.i64",
                                      ".grad.f32"};

// A directory of files the Python process reads and writes, in /dev/shm
// where there is one (GiBs of weights pass through it: memory, not a disk's
// write-back during the timings), each file removed by a signal that ends
// the process too.
class ScratchDir {
 public:
  ScratchDir() {
    const fs::path base = fs::is_directory("/dev/shm") && access("/dev/shm", W_OK) == 0
                              ? fs::path("/dev/shm")
                              : fs::temp_directory_path();
    std::string pattern = (base / "embshard-fbgemm-XXXXXX").string();
    ES_CHECK(mkdtemp(pattern.data()) != nullptr, "bench kernel: cannot create a directory in {}: {}",
             base.string(), std::strerror(errno));
    path_ = pattern;
    guards_.push_back(std::make_unique<TempFileGuard>(path_, /*directory=*/true));
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  // The path of a file in it, guarded until remove(name).
  std::string file(const std::string& name) {
    const std::string p = (fs::path(path_) / name).string();
    if (files_.count(name) == 0) files_[name] = std::make_unique<TempFileGuard>(p);
    return p;
  }
  void remove(const std::string& name) {
    std::error_code ignored;
    fs::remove(fs::path(path_) / name, ignored);
    files_.erase(name);
  }

 private:
  std::string path_;
  std::vector<std::unique_ptr<TempFileGuard>> guards_;  // the directory's
  std::map<std::string, std::unique_ptr<TempFileGuard>> files_;
};

void write_bytes(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  ES_CHECK(out.good(), "bench kernel: cannot write {} bytes to {}", bytes, path);
}

std::vector<float> read_floats(const std::string& path) {
  const std::string bytes = read_file(path);
  ES_CHECK(bytes.size() % sizeof(float) == 0, "bench kernel: {}: {} bytes, not whole floats", path,
           bytes.size());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

const char* op_name(KernelOp op) {
  switch (op) {
    case KernelOp::kForward: return "forward";
    case KernelOp::kTrainSgd: return "train_sgd";
    case KernelOp::kTrainRowWiseAdagrad: return "train_rowwise_adagrad";
  }
  return "?";
}

class FbgemmKernelPeer : public KernelPeer {
 public:
  FbgemmKernelPeer(FbgemmPeerOptions options, std::string python)
      : options_(options), python_(std::move(python)) {}
  ~FbgemmKernelPeer() override { stop(); }

  std::string name() const override { return "FBGEMM"; }
  std::string about() const override {
    return huge_page_mib_ < 0.0 ? about_
                                : fmt::format("{}; {:.0f} MiB of its memory on huge pages after "
                                              "loading the last case",
                                              about_, huge_page_mib_);
  }
  bool has(KernelOp) const override { return true; }

  void prepare(const FusedBatch& batch, const float* grad_output,
               const KernelBenchOptimizers& optimizers) override {
    if (!started_) start();
    const std::string name = fmt::format("case{}", cases_++);
    write_case(name, batch, grad_output, optimizers);
    const nlohmann::json loaded = request({{"op", "load"}, {"case", name}});
    if (loaded.contains("huge_page_bytes") && loaded["huge_page_bytes"].is_number()) {
      huge_page_mib_ = loaded["huge_page_bytes"].get<double>() / (1 << 20);
    }
    // Loaded, all of it: GiBs of memory back.
    for (const char* suffix : kCaseFiles) dir_->remove(name + suffix);
  }

  double run(KernelOp op) override {
    const nlohmann::json reply = request({{"op", "time"}, {"what", op_name(op)}});
    ES_CHECK(reply.contains("ms") && reply["ms"].is_number() && reply["ms"].get<double>() > 0.0,
             "bench kernel: the FBGEMM peer's reply to 'time' has no positive 'ms': {}",
             reply.dump());
    return reply["ms"].get<double>();
  }

  std::vector<float> forward_output() override {
    const std::string out = dir_->file("forward.f32");
    request({{"op", "forward_output"}, {"path", out}});
    std::vector<float> values = read_floats(out);
    dir_->remove("forward.f32");
    return values;
  }

  std::vector<float> train_rows(KernelOp op, const std::vector<TableRow>& rows) override {
    std::vector<int64_t> pairs;
    for (const auto& [t, r] : rows) pairs.insert(pairs.end(), {int64_t{t}, r});
    const std::string in = dir_->file("rows.i64"), out = dir_->file("rows.f32");
    write_bytes(in, pairs.data(), pairs.size() * sizeof(int64_t));
    request({{"op", "train_rows"},
             {"optimizer", op == KernelOp::kTrainSgd ? "sgd" : "rowwise_adagrad"},
             {"rows_path", in},
             {"path", out}});
    std::vector<float> values = read_floats(out);
    dir_->remove("rows.i64");
    dir_->remove("rows.f32");
    return values;
  }

 private:
  void start();
  void stop() noexcept;
  void write_case(const std::string& name, const FusedBatch& batch, const float* grad_output,
                  const KernelBenchOptimizers& optimizers);
  nlohmann::json request(const nlohmann::json& command);
  nlohmann::json read_reply(const std::string& what);
  [[noreturn]] void fail_exited(const std::string& what);

  FbgemmPeerOptions options_;
  std::string python_;
  std::unique_ptr<ScratchDir> dir_;
  int commands_fd_ = -1, replies_fd_ = -1;
  std::thread worker_;
  std::atomic<bool> exited_{false};
  std::exception_ptr failure_;
  std::string pending_;  // reply bytes read past the last newline
  bool started_ = false;
  int cases_ = 0;
  std::string about_;
  double huge_page_mib_ = -1.0;
};

void FbgemmKernelPeer::start() {
  started_ = true;
  dir_ = std::make_unique<ScratchDir>();
  const nlohmann::json settings = {{"format", "embshard-fbgemm-peer"},
                                   {"version", 1},
                                   {"threads", options_.threads},
                                   {"flush_bytes", options_.flush_bytes}};
  const std::string text = settings.dump(2);
  write_bytes(dir_->file("peer.json"), text.data(), text.size());
  for (const char* fifo : {"commands", "replies"}) {
    const std::string p = dir_->file(fifo);
    ES_CHECK(mkfifo(p.c_str(), 0600) == 0, "bench kernel: cannot make the FIFO {}: {}", p,
             std::strerror(errno));
  }
  // Read-write ends never block on open and never see end-of-file, so the
  // Python process's liveness is watched instead (exited_); close-on-exec
  // keeps the child from holding our ends, so that it sees end-of-file on
  // commands if this process dies.
  commands_fd_ = open(dir_->file("commands").c_str(), O_RDWR | O_CLOEXEC);
  replies_fd_ = open(dir_->file("replies").c_str(), O_RDWR | O_CLOEXEC);
  ES_CHECK(commands_fd_ >= 0 && replies_fd_ >= 0, "bench kernel: cannot open the FIFOs in {}: {}",
           dir_->path(), std::strerror(errno));
  const std::string dir = dir_->path();
  worker_ = std::thread([this, dir] {
    try {
      run_python_module(kModule, {"serve", dir}, "bench kernel's FBGEMM peer");
    } catch (...) {
      failure_ = std::current_exception();
    }
    exited_.store(true, std::memory_order_release);
  });
  const nlohmann::json ready = read_reply("start");
  ES_CHECK(ready.value("threads", 0) == options_.threads,
           "bench kernel: the FBGEMM peer runs {} torch threads, not the {} asked for",
           ready.value("threads", 0), options_.threads);
  about_ = fmt::format(
      "fbgemm_gpu {} (torch {}) under {}: SplitTableBatchedEmbeddingBagsCodegen, HOST/CPU, fp32, "
      "optimizer fused into backward; its own process, timing its own calls",
      ready.value("fbgemm_gpu", "?"), ready.value("torch", "?"), python_);
}

void FbgemmKernelPeer::stop() noexcept {
  try {
    if (worker_.joinable() && !exited_.load(std::memory_order_acquire)) {
      request({{"op", "quit"}});
    }
  } catch (...) {  // a peer that failed has said why already
  }
  // The process, if still there, sees end-of-file on commands and ends.
  for (int* fd : {&commands_fd_, &replies_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  if (worker_.joinable()) worker_.join();
  dir_.reset();
}

void FbgemmKernelPeer::write_case(const std::string& name, const FusedBatch& batch,
                                  const float* grad_output,
                                  const KernelBenchOptimizers& optimizers) {
  const int64_t b = batch.batch_size;
  nlohmann::json tables = nlohmann::json::array();
  std::ofstream weights(dir_->file(name + ".weights.f32"), std::ios::binary | std::ios::trunc);
  std::vector<int64_t> offsets, indices;
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const TableBatch& tb = batch.tables[t];
    ES_CHECK(tb.per_sample_weights == nullptr,
             "bench kernel: the FBGEMM peer takes no per-sample weights (table {})", t);
    const int64_t nnz = tb.offsets[b];
    tables.push_back({{"rows", tb.rows}, {"dim", tb.dim}, {"num_indices", nnz}});
    weights.write(reinterpret_cast<const char*>(tb.weights),
                  static_cast<std::streamsize>(tb.rows * tb.dim * sizeof(float)));
    offsets.insert(offsets.end(), tb.offsets, tb.offsets + b + 1);
    indices.insert(indices.end(), tb.indices, tb.indices + nnz);
  }
  weights.close();
  ES_CHECK(weights.good(), "bench kernel: cannot write the weights to {}", dir_->path());
  write_bytes(dir_->file(name + ".offsets.i64"), offsets.data(), offsets.size() * 8);
  write_bytes(dir_->file(name + ".indices.i64"), indices.data(), indices.size() * 8);
  write_bytes(dir_->file(name + ".grad.f32"), grad_output,
              static_cast<size_t>(b * batch.total_dim()) * sizeof(float));
  const nlohmann::json c = {
      {"batch_size", b},
      {"pooling", batch.pooling == PoolingMode::kMean ? "mean" : "sum"},
      {"tables", tables},
      {"sgd_learning_rate", optimizers.sgd.learning_rate},
      {"adagrad_learning_rate", optimizers.rowwise_adagrad.learning_rate},
      {"adagrad_eps", optimizers.rowwise_adagrad.eps}};
  const std::string text = c.dump(2);
  write_bytes(dir_->file(name + ".json"), text.data(), text.size());
}

nlohmann::json FbgemmKernelPeer::request(const nlohmann::json& command) {
  if (exited_.load(std::memory_order_acquire)) fail_exited(command.value("op", "?"));
  const std::string line = command.dump() + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = write(commands_fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ES_CHECK(n > 0, "bench kernel: cannot write to the FBGEMM peer: {}", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return read_reply(command.value("op", "?"));
}

nlohmann::json FbgemmKernelPeer::read_reply(const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.reply_timeout_s * 1e3));
  size_t newline;
  while ((newline = pending_.find('\n')) == std::string::npos) {
    pollfd p{replies_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (ready > 0) {
      char buffer[4096];
      const ssize_t n = read(replies_fd_, buffer, sizeof buffer);
      if (n > 0) pending_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (exited_.load(std::memory_order_acquire)) fail_exited(what);
    ES_CHECK(Clock::now() < deadline, "bench kernel: the FBGEMM peer did not answer '{}' within {} s",
             what, options_.reply_timeout_s);
  }
  const std::string line = pending_.substr(0, newline);
  pending_.erase(0, newline + 1);
  nlohmann::json reply = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  ES_CHECK(reply.is_object() && reply.contains("ok"),
           "bench kernel: the FBGEMM peer answered '{}' with '{}', not a reply", what, line);
  ES_CHECK(reply["ok"] == true, "bench kernel: the FBGEMM peer refused '{}': {}", what,
           reply.value("error", line));
  return reply;
}

void FbgemmKernelPeer::fail_exited(const std::string& what) {
  if (worker_.joinable()) worker_.join();
  if (failure_) std::rethrow_exception(failure_);
  ES_THROW("bench kernel: the FBGEMM peer ({} -m {}) ended before answering '{}'", python_,
           kModule, what);
}

}  // namespace

std::unique_ptr<KernelPeer> make_fbgemm_kernel_peer(const FbgemmPeerOptions& options,
                                                    std::string* why_not) {
  std::string python;
  try {
    python = torchrec_python();
  } catch (const Error& e) {
    // A reason, not a failure: the message without the check's location.
    std::string why = e.what();
    if (const size_t at = why.rfind(" ["); at != std::string::npos && why.back() == ']') {
      why.erase(at);
    }
    if (why_not != nullptr) *why_not = why;
    return nullptr;
  }
  return std::make_unique<FbgemmKernelPeer>(options, python);
}

}  // namespace embshard
