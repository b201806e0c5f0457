// Diagnostics: where the library's notes and progress go.
//
// Library code never writes to stderr itself. Long work reports progress and
// notes to a Reporter the caller supplies: the CLI passes stderr_reporter()
// (a bar on a terminal, plain lines in a log), an embedding program passes
// its own, tests capture what was said (CaptureReporter), and a caller that
// wants silence passes silent_reporter().
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace embshard {

// One progress report of a long job.
struct ProgressEvent {
  std::string label;    // the job: "bench compute", "eval", ...
  uint64_t done = 0, total = 0;
  double rate_per_s = 0;  // items done by this process per second (0: none yet)
  double eta_s = -1;      // seconds left (-1: unknown)
  double elapsed_s = 0;
  bool final = false;     // the job is over
  std::string note;       // what the last item was, a resumption, ...
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  // A line for the user: "plan: note: no --mem given; assuming ...".
  virtual void note(const std::string& text) = 0;
  // Progress of a long job; Progress (below) calls this at a sensible rate.
  virtual void progress(const ProgressEvent& event) = 0;
  // How often the reporter wants progress, in seconds (a terminal redraws
  // often; a log file wants a line now and then).
  virtual double progress_interval_s() const { return 5.0; }
};

// "12/40 (30%), 1.6s each, ETA 45s, last 7 tables": a progress event as the
// CLI shows it (without the job's label).
std::string progress_text(const ProgressEvent& event);

// The CLI's reporter: notes and progress on stderr, a bar when stderr is a
// terminal. Thread-safe.
Reporter& stderr_reporter();
// Says nothing.
Reporter& silent_reporter();

// Keeps everything it is told (tests; embedding programs that show it later).
class CaptureReporter : public Reporter {
 public:
  void note(const std::string& text) override;
  void progress(const ProgressEvent& event) override;
  double progress_interval_s() const override { return 0; }
  std::vector<std::string> notes() const;
  std::vector<ProgressEvent> events() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> notes_;
  std::vector<ProgressEvent> events_;
};

// Rate and ETA of a job of `total` items, reported to a Reporter at the rate
// it asks for, always at the start and at finish().
class Progress {
 public:
  // `done` items may already be complete (a resumed run); the rate counts
  // only the items done by this process.
  Progress(Reporter& reporter, std::string label, uint64_t total, uint64_t done = 0);
  ~Progress();

  void update(uint64_t done, const std::string& note = "");
  void finish(const std::string& note = "");

 private:
  void report(bool final, const std::string& note);

  Reporter& reporter_;
  std::string label_;
  uint64_t total_, start_done_, done_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_report_;
};

// "1:02:03", "4:05", "7s".
std::string format_duration(double seconds);

}  // namespace embshard
