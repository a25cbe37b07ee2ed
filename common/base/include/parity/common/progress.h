// Progress of long work (parity run: two trainings and a comparison per case), as a person or
// a CI log wants it: on a terminal one line redrawn in place with a bar, the phase and an ETA;
// elsewhere (a pipe, a CI log) plain lines at most every tenth of the work and at each new
// phase, never a carriage return.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace parity {

class Progress {
 public:
  // `total` units of work (e.g. the steps of both trainings); `stream` is where lines go
  // (stderr); `interactive` chooses the redrawn bar (default: whether `stream` is a terminal).
  Progress(std::string title, int64_t total, std::FILE* stream = stderr);
  Progress(std::string title, int64_t total, std::FILE* stream, bool interactive);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts a named phase ("ddp_ref", "pmap_engine", "compare").
  void phase(const std::string& name);
  // `done` units of the total are finished.
  void update(int64_t done);
  // Ends the bar's line (the next output starts on a fresh line).
  void finish();

  // "1:05" / "12s": the estimated time left from the average rate so far; "" without data.
  static std::string eta_text(double elapsed_seconds, int64_t done, int64_t total);

 private:
  void draw();

  std::string title_;
  std::string phase_;
  int64_t total_ = 1;
  int64_t done_ = 0;
  int64_t last_reported_tenth_ = -1;
  std::FILE* stream_;
  bool interactive_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace parity
