#include "parity/common/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace parity {
namespace {

constexpr int kBarWidth = 24;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Progress::Progress(std::string title, int64_t total, std::FILE* stream)
    : Progress(std::move(title), total, stream, isatty(fileno(stream)) != 0) {}

Progress::Progress(std::string title, int64_t total, std::FILE* stream, bool interactive)
    : title_(std::move(title)),
      total_(std::max<int64_t>(1, total)),
      stream_(stream),
      interactive_(interactive),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

std::string Progress::eta_text(double elapsed_seconds, int64_t done, int64_t total) {
  if (done <= 0 || elapsed_seconds <= 0) return "";
  const double left =
      elapsed_seconds * static_cast<double>(total - done) / static_cast<double>(done);
  const int64_t seconds = static_cast<int64_t>(std::ceil(std::max(0.0, left)));
  if (seconds < 60) return fmt::format("{}s", seconds);
  return fmt::format("{}:{:02}", seconds / 60, seconds % 60);
}

void Progress::phase(const std::string& name) {
  phase_ = name;
  if (!interactive_) {
    last_reported_tenth_ = 10 * done_ / total_;  // the phase line reports this tenth
    fmt::print(stream_, "{}: {} ({}% done)\n", title_, phase_, 100 * done_ / total_);
    std::fflush(stream_);
    return;
  }
  draw();
}

void Progress::update(int64_t done) {
  done_ = std::clamp<int64_t>(done, 0, total_);
  if (interactive_) {
    draw();
    return;
  }
  const int64_t tenth = 10 * done_ / total_;
  if (tenth == last_reported_tenth_) return;
  last_reported_tenth_ = tenth;
  const std::string eta = eta_text(seconds_since(start_), done_, total_);
  fmt::print(stream_, "{}: {} {}%{}\n", title_, phase_, 10 * tenth,
             eta.empty() ? "" : ", about " + eta + " left");
  std::fflush(stream_);
}

void Progress::draw() {
  const int filled = static_cast<int>(kBarWidth * done_ / total_);
  const std::string eta = eta_text(seconds_since(start_), done_, total_);
  // \r and erase-to-end-of-line: the line is redrawn in place.
  fmt::print(stream_, "\r\033[K{} [{}{}] {:>3}% {}{}", title_, std::string(filled, '#'),
             std::string(kBarWidth - filled, '.'), 100 * done_ / total_, phase_,
             eta.empty() ? "" : "  ETA " + eta);
  std::fflush(stream_);
  line_open_ = true;
}

void Progress::finish() {
  if (!line_open_) return;
  fmt::print(stream_, "\n");
  std::fflush(stream_);
  line_open_ = false;
}

}  // namespace parity
