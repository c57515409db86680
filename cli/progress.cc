#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace smallem {

ProgressLine::ProgressLine(std::FILE* out, double plain_interval_s)
    : out_(out), terminal_(isatty(fileno(out)) != 0), interval_s_(plain_interval_s) {}

ProgressLine::~ProgressLine() { Finish(); }

void ProgressLine::Update(const std::string& text, bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (!force && since < (terminal_ ? 0.1 : interval_s_)) return;
  last_ = now;
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s", text.c_str());
    open_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (open_) std::fprintf(out_, "\n");
  open_ = false;
  std::fflush(out_);
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string FormatBar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width + 0.5);
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
}

}  // namespace smallem
