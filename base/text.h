// Text that came from outside (a worker's failure message, a hostname, an
// id) made safe to store, send and print: valid UTF-8, no terminal control
// sequences, bounded length. Protobuf `string` fields must be valid UTF-8 —
// one dangling byte makes every later read of the field fail for a
// conforming client — and an escape sequence or a bare carriage return in a
// message could forge what a terminal or a log shows.
#ifndef SMALLEM_BASE_TEXT_H_
#define SMALLEM_BASE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace smallem {

// `text` with every invalid UTF-8 sequence and every control character
// except newline and tab (C0, DEL, C1; ESC among them) replaced by U+FFFD,
// then cut to at most `max_bytes` on a character boundary. Pure.
std::string SanitizeText(std::string_view text, size_t max_bytes);

// The same on one line: newlines and tabs become spaces too. For names and
// for text echoed into an error message.
std::string SanitizeLine(std::string_view text, size_t max_bytes);

// The candidate nearest to `word` in optimal-string-alignment distance
// ("rsm" is one edit from "rms"), when it is at most 2 edits away and fewer
// than the longer word's length (so "x" does not suggest "y"); "" when none
// is. Candidates whose length differs by more than 2 are never compared, so
// a huge word costs nothing.
std::string ClosestWord(std::string_view word, const std::vector<std::string>& candidates);

// "1 document", "0 documents", "3 variants": `count` and the noun that
// agrees with it. Pure.
std::string CountedNoun(long long count, std::string_view singular, std::string_view plural);

// The shortest decimal that reads back as exactly `value` ("0.1", not
// 0.10000000000000001; "1e-07"): for CSV cells and other text that a
// program parses again. Pure.
std::string ShortestDecimal(double value);

// `word` as one word that a POSIX shell reads back unchanged: as it is when
// it is non-empty and made only of letters, digits and _./:=@%+-, else
// single-quoted with each ' written '\''. For the commands a CLI prints or
// a generated script runs. Pure.
std::string ShellWord(std::string_view word);

}  // namespace smallem

#endif  // SMALLEM_BASE_TEXT_H_
