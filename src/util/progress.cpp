#include "embshard/util/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace embshard {

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

Progress::Progress(std::string label, uint64_t total, uint64_t done)
    : label_(std::move(label)),
      total_(total),
      start_done_(done),
      done_(done),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  draw(false, done > 0 ? fmt::format("resuming after {} done", done) : "");
}

Progress::~Progress() {
  if (!finished_ && tty_) std::fputc('\n', stderr);
}

void Progress::update(uint64_t done, const std::string& note) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  const double since_draw = std::chrono::duration<double>(now - last_draw_).count();
  // A terminal redraws often; a log gets a line every 5 s at most.
  if (since_draw >= (tty_ ? 0.1 : 5.0)) draw(false, note);
}

void Progress::finish(const std::string& note) {
  if (finished_) return;
  draw(true, note);
  finished_ = true;
}

void Progress::draw(bool final, const std::string& note) {
  last_draw_ = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  const uint64_t fresh = done_ - start_done_;
  const double rate = elapsed > 0 ? fresh / elapsed : 0.0;
  const double eta = rate > 0 ? (total_ - done_) / rate : -1.0;
  const double share = total_ > 0 ? static_cast<double>(done_) / total_ : 1.0;
  std::string text = fmt::format("{}/{} ({:.0f}%)", done_, total_, 100 * share);
  if (fresh > 0) {
    text += rate >= 1 ? fmt::format(", {:.1f}/s", rate) : fmt::format(", {:.1f}s each", 1 / rate);
    text += final ? fmt::format(", took {}", format_duration(elapsed))
                  : fmt::format(", ETA {}", format_duration(eta));
  }
  if (!note.empty()) text += ", " + note;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(share * kWidth);
    std::fprintf(stderr, "\r\033[K%s [%s%s] %s%s", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), text.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s: %s\n", label_.c_str(), text.c_str());
  }
  std::fflush(stderr);
}

}  // namespace embshard
