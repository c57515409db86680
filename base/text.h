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

namespace smallem {

// `text` with every invalid UTF-8 sequence and every control character
// except newline and tab (C0, DEL, C1; ESC among them) replaced by U+FFFD,
// then cut to at most `max_bytes` on a character boundary. Pure.
std::string SanitizeText(std::string_view text, size_t max_bytes);

// The same on one line: newlines and tabs become spaces too. For names and
// for text echoed into an error message.
std::string SanitizeLine(std::string_view text, size_t max_bytes);

}  // namespace smallem

#endif  // SMALLEM_BASE_TEXT_H_
