#include "embshard/util/reporter.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace embshard {

std::string progress_text(const ProgressEvent& e) {
  const double share = e.total > 0 ? static_cast<double>(e.done) / e.total : 1.0;
  std::string text = fmt::format("{}/{} ({:.0f}%)", e.done, e.total, 100 * share);
  if (e.rate_per_s > 0) {
    text += e.rate_per_s >= 1 ? fmt::format(", {:.1f}/s", e.rate_per_s)
                              : fmt::format(", {:.1f}s each", 1 / e.rate_per_s);
    text += e.final ? fmt::format(", took {}", format_duration(e.elapsed_s))
                    : fmt::format(", ETA {}", format_duration(e.eta_s));
  }
  if (!e.note.empty()) text += ", " + e.note;
  return text;
}

namespace {

class StderrReporter : public Reporter {
 public:
  StderrReporter() : tty_(::isatty(STDERR_FILENO) == 1) {}

  void note(const std::string& text) override {
    std::lock_guard<std::mutex> lock(mutex_);
    end_bar();
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }

  void progress(const ProgressEvent& e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string text = progress_text(e);
    if (tty_) {
      constexpr int kWidth = 30;
      const double share = e.total > 0 ? static_cast<double>(e.done) / e.total : 1.0;
      const int filled = static_cast<int>(share * kWidth);
      std::fprintf(stderr, "\r\033[K%s [%s%s] %s%s", e.label.c_str(),
                   std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                   text.c_str(), e.final ? "\n" : "");
      bar_open_ = !e.final;
    } else {
      std::fprintf(stderr, "%s: %s\n", e.label.c_str(), text.c_str());
    }
    std::fflush(stderr);
  }

  double progress_interval_s() const override { return tty_ ? 0.1 : 5.0; }

 private:
  // A note in the middle of a bar starts on a line of its own.
  void end_bar() {
    if (bar_open_) std::fputc('\n', stderr);
    bar_open_ = false;
  }

  bool tty_;
  bool bar_open_ = false;
  std::mutex mutex_;
};

class SilentReporter : public Reporter {
 public:
  void note(const std::string&) override {}
  void progress(const ProgressEvent&) override {}
};

}  // namespace

Reporter& stderr_reporter() {
  static StderrReporter reporter;
  return reporter;
}

Reporter& silent_reporter() {
  static SilentReporter reporter;
  return reporter;
}

void CaptureReporter::note(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  notes_.push_back(text);
}

void CaptureReporter::progress(const ProgressEvent& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(event);
}

std::vector<std::string> CaptureReporter::notes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return notes_;
}

std::vector<ProgressEvent> CaptureReporter::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

Progress::Progress(Reporter& reporter, std::string label, uint64_t total, uint64_t done)
    : reporter_(reporter),
      label_(std::move(label)),
      total_(total),
      start_done_(done),
      done_(done),
      start_(std::chrono::steady_clock::now()),
      last_report_(start_) {
  report(false, done > 0 ? fmt::format("resuming after {} done", done) : "");
}

Progress::~Progress() {
  // A job cut short by an exception still closes its bar.
  if (!finished_) report(true, "stopped");
}

void Progress::update(uint64_t done, const std::string& note) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_report_).count() >=
      reporter_.progress_interval_s()) {
    report(false, note);
  }
}

void Progress::finish(const std::string& note) {
  if (finished_) return;
  report(true, note);
  finished_ = true;
}

void Progress::report(bool final, const std::string& note) {
  last_report_ = std::chrono::steady_clock::now();
  ProgressEvent e;
  e.label = label_;
  e.done = done_;
  e.total = total_;
  e.elapsed_s = std::chrono::duration<double>(last_report_ - start_).count();
  const uint64_t fresh = done_ - start_done_;
  e.rate_per_s = e.elapsed_s > 0 && fresh > 0 ? fresh / e.elapsed_s : 0.0;
  e.eta_s = e.rate_per_s > 0 ? (total_ - done_) / e.rate_per_s : -1.0;
  e.final = final;
  e.note = note;
  reporter_.progress(e);
}

}  // namespace embshard
