#include "corpus/pretokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace smallem {
namespace {

enum ByteClass : uint8_t { kLetter, kDigit, kSpace, kOther };

constexpr std::array<ByteClass, 256> MakeClassTable() {
  std::array<ByteClass, 256> table{};
  for (int b = 0; b < 256; ++b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80) {
      table[b] = kLetter;
    } else if (b >= '0' && b <= '9') {
      table[b] = kDigit;
    } else if (b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' ||
               b == '\f') {
      table[b] = kSpace;
    } else {
      table[b] = kOther;
    }
  }
  return table;
}

constexpr std::array<ByteClass, 256> kClass = MakeClassTable();

inline ByteClass ClassOf(char c) { return kClass[static_cast<uint8_t>(c)]; }

// Length of the contraction at text[begin] ('s, 're, ...), or 0.
size_t ContractionLength(std::string_view text, size_t begin) {
  if (text[begin] != '\'' || begin + 1 >= text.size()) return 0;
  char c = text[begin + 1];
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
  if (begin + 2 >= text.size()) return 0;
  char d = text[begin + 2];
  if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') ||
      (c == 'l' && d == 'l')) {
    return 3;
  }
  return 0;
}

}  // namespace

size_t ChunkEnd(std::string_view text, size_t begin) {
  const size_t n = std::min(text.size(), begin + kMaxChunkBytes);
  if (size_t length = ContractionLength(text, begin); length > 0) {
    return std::min(begin + length, n);
  }
  size_t i = begin;
  ByteClass cls = ClassOf(text[i]);
  if (text[i] == ' ' && i + 1 < text.size() && ClassOf(text[i + 1]) != kSpace) {
    // A single space joins the word, number or punctuation run after it.
    ++i;
    cls = ClassOf(text[i]);
    if (i >= n) return n;
  }
  if (cls != kSpace) {
    ++i;
    while (i < n && ClassOf(text[i]) == cls) ++i;
    return i;
  }
  // Whitespace: the whole run, less its last byte when text follows.
  while (i < text.size() && ClassOf(text[i]) == kSpace) ++i;
  if (i < text.size() && i - begin >= 2) --i;
  return std::min(i, n);
}

}  // namespace smallem
