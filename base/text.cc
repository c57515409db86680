#include "base/text.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace smallem {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at the start of `s` (1 to 4), or 0
// when it does not start with one (overlong forms, surrogates and code
// points above U+10FFFF are invalid).
size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2;
    code = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3;
    code = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4;
    code = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

bool IsControl(std::string_view character) {
  if (character.size() == 1) {
    const auto c = static_cast<uint8_t>(character[0]);
    return c < 0x20 || c == 0x7F;
  }
  // C1 controls, U+0080..U+009F, are two bytes: C2 80..C2 9F.
  return character.size() == 2 && static_cast<uint8_t>(character[0]) == 0xC2 &&
         static_cast<uint8_t>(character[1]) < 0xA0;
}

std::string Sanitize(std::string_view text, size_t max_bytes, bool one_line) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  while (!text.empty()) {
    size_t length = Utf8SequenceLength(text);
    std::string_view piece;
    if (length == 0) {
      piece = kReplacement;
      length = 1;
    } else {
      piece = text.substr(0, length);
      if (piece == "\n" || piece == "\t") {
        if (one_line) piece = " ";
      } else if (IsControl(piece)) {
        piece = kReplacement;
      }
    }
    if (out.size() + piece.size() > max_bytes) break;
    out.append(piece);
    text.remove_prefix(length);
  }
  return out;
}

// Optimal-string-alignment distance (Levenshtein plus adjacent swaps).
int EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestWord(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  int best_distance = 3;
  for (const std::string& c : candidates) {
    const size_t gap = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (gap >= static_cast<size_t>(best_distance)) continue;
    const int d = EditDistance(word, c);
    if (d < best_distance && d < static_cast<int>(std::max(word.size(), c.size()))) {
      best = &c;
      best_distance = d;
    }
  }
  return best != nullptr ? *best : std::string();
}

std::string SanitizeText(std::string_view text, size_t max_bytes) {
  return Sanitize(text, max_bytes, /*one_line=*/false);
}

std::string SanitizeLine(std::string_view text, size_t max_bytes) {
  return Sanitize(text, max_bytes, /*one_line=*/true);
}

std::string CountedNoun(long long count, std::string_view singular, std::string_view plural) {
  return std::to_string(count) + " " + std::string(count == 1 ? singular : plural);
}

std::string ShortestDecimal(double value) {
  char buffer[64];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, r.ptr);
}

std::string ShellWord(std::string_view word) {
  constexpr std::string_view kSafe =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+-";
  if (!word.empty() && word.find_first_not_of(kSafe) == std::string_view::npos) {
    return std::string(word);
  }
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace smallem
