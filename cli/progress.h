// ProgressLine: how long commands show progress. On a terminal one line is
// rewritten in place (throttled to ~10 updates a second); when output is a
// file or pipe, each update is a plain line, throttled to one every
// `plain_interval_s` seconds, so logs stay readable.
#ifndef SMALLEM_CLI_PROGRESS_H_
#define SMALLEM_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace smallem {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out = stderr, double plain_interval_s = 5.0);
  ~ProgressLine();

  bool is_terminal() const { return terminal_; }
  // Shows `text`; `force` bypasses throttling (use for the last update).
  void Update(const std::string& text, bool force = false);
  // Ends the in-place line (a newline on a terminal).
  void Finish();

 private:
  std::FILE* out_;
  bool terminal_;
  double interval_s_;
  bool open_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// "1m05s", "2h03m", "45s".
std::string FormatDuration(double seconds);
// A bar of `width` cells, e.g. "[#####.....]".
std::string FormatBar(double fraction, int width = 20);

}  // namespace smallem

#endif  // SMALLEM_CLI_PROGRESS_H_
