#include "corpus/text_cleaning.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace smallem {
namespace {

// Debian's abseil has its own string_view type.
absl::string_view Absl(std::string_view text) { return {text.data(), text.size()}; }

// The text as UTF-8: unchanged when it already is, else read as Latin-1 (the
// encoding of older Gutenberg files).
std::string AsUtf8(std::string_view raw) {
  return IsValidUtf8(raw) ? std::string(raw) : Latin1ToUtf8(raw);
}

// Offset of the start of the first line at or after `from` whose text (after
// leading spaces) starts with one of prefixes, ignoring case; npos if none.
template <size_t N>
size_t FindLine(std::string_view text, size_t from,
                const std::array<std::string_view, N>& prefixes) {
  size_t start = from;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    absl::string_view line = absl::StripLeadingAsciiWhitespace(
        Absl(text.substr(start, end - start)));
    for (std::string_view prefix : prefixes) {
      if (absl::StartsWithIgnoreCase(line, Absl(prefix))) return start;
    }
    start = end + 1;
  }
  return std::string_view::npos;
}

// Offset just after the line that starts at `line_start`.
size_t AfterLine(std::string_view text, size_t line_start) {
  size_t end = text.find('\n', line_start);
  return end == std::string_view::npos ? text.size() : end + 1;
}

// Removes HTML-like tags ("<i>", "</p>", "<br/>"): a '<' followed by a letter,
// '/' or '!', closed by '>' on the same line within 200 bytes.
std::string RemoveTags(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && i + 1 < text.size() &&
        (absl::ascii_isalpha(text[i + 1]) || text[i + 1] == '/' || text[i + 1] == '!')) {
      size_t close = i + 1;
      while (close < text.size() && close - i < 200 && text[close] != '>' &&
             text[close] != '<' && text[close] != '\n') {
        ++close;
      }
      if (close < text.size() && text[close] == '>') {
        i = close;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

// Removes bracketed notes whose text starts with one of prefixes (ignoring
// case), e.g. "[Illustration: ...]", "[Applause]", with the spaces before
// them on the same line.
std::string RemoveNotes(std::string_view text,
                        const std::vector<std::string_view>& prefixes) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '[') {
      std::string_view rest = text.substr(i + 1);
      bool match = false;
      for (std::string_view prefix : prefixes) {
        match = match || absl::StartsWithIgnoreCase(Absl(rest), Absl(prefix));
      }
      size_t close = text.find(']', i);
      if (match && close != std::string_view::npos && close - i < 1000) {
        while (!out.empty() && out.back() == ' ') out.pop_back();
        i = close;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length;
    uint32_t code;
    if ((c & 0xe0) == 0xc0) {
      length = 2, code = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      length = 3, code = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      length = 4, code = c & 0x07;
    } else {
      return false;
    }
    if (i + length > n) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      code = (code << 6) | (s[i + k] & 0x3f);
    }
    static constexpr uint32_t kMinimum[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[length] || code > 0x10ffff ||
        (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string Latin1ToUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char ch : text) {
    const auto c = static_cast<uint8_t>(ch);
    if (c < 0x80) {
      out.push_back(ch);
    } else {
      out.push_back(static_cast<char>(0xc0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

std::string NormalizeLineEndings(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string TidyWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  int pending_newlines = 0;  // line ends held back until more text comes
  for (absl::string_view line : absl::StrSplit(Absl(text), '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) {
      ++pending_newlines;
      continue;
    }
    if (!out.empty()) out.append(std::min(pending_newlines, 2), '\n');
    out.append(line.data(), line.size());
    pending_newlines = 1;
  }
  if (!out.empty()) out.push_back('\n');
  return out;
}

std::string CleanGutenbergText(std::string_view raw) {
  const std::string text = NormalizeLineEndings(AsUtf8(raw));
  std::string_view view = text;

  // Header: everything through the START line, or through the old-style
  // small print when it opens the file.
  size_t begin = 0;
  static constexpr std::array<std::string_view, 2> kStart = {"*** START OF",
                                                             "***START OF"};
  static constexpr std::array<std::string_view, 1> kSmallPrintEnd = {
      "*END*THE SMALL PRINT"};
  if (size_t start = FindLine(view, 0, kStart); start != std::string_view::npos) {
    begin = AfterLine(view, start);
  } else if (size_t end = FindLine(view, 0, kSmallPrintEnd);
             end != std::string_view::npos && end < view.size() / 2) {
    begin = AfterLine(view, end);
  }
  // Footer: from the first END line or licence block after the header.
  static constexpr std::array<std::string_view, 6> kEnd = {
      "*** END OF",
      "***END OF",
      "End of Project Gutenberg",
      "End of the Project Gutenberg",
      "End of this Project Gutenberg",
      "***START**THE SMALL PRINT"};
  size_t end = FindLine(view, begin, kEnd);
  if (end == std::string_view::npos) end = view.size();
  std::string body = RemoveTags(view.substr(begin, end - begin));
  body = RemoveNotes(body, {"Illustration"});
  std::erase(body, '_');
  return TidyWhitespace(body);
}

std::string CleanTranscriptText(std::string_view raw) {
  std::string text = NormalizeLineEndings(AsUtf8(raw));
  text = RemoveNotes(text, {"Applause]", "Laughter]"});
  return TidyWhitespace(text);
}

}  // namespace smallem
