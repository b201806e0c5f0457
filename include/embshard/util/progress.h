// Progress reporting for long work: a bar with rate and ETA on a terminal,
// plain lines (at most one every few seconds) when stderr is not a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace embshard {

class Progress {
 public:
  // `done` items may already be complete (a resumed run); the rate counts
  // only the items done by this process.
  Progress(std::string label, uint64_t total, uint64_t done = 0);
  ~Progress();

  void update(uint64_t done, const std::string& note = "");
  void finish(const std::string& note = "");

 private:
  void draw(bool final, const std::string& note);

  std::string label_;
  uint64_t total_, start_done_, done_;
  bool tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1:02:03", "4:05", "7s".
std::string format_duration(double seconds);

}  // namespace embshard
