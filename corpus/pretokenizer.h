// Pre-tokenization: the split of a text into chunks before byte-pair merges.
//
// BPE merges never cross a chunk boundary, so a token never spans a word and
// the space before it, or a word and the punctuation after it. The rules are
// GPT-2's, written by hand on bytes (no regex, no Unicode tables):
//
//   * a contraction: 's 't 'm 'd 're 've 'll
//   * an optional single space, then a run of letters (A-Z, a-z, and every
//     byte >= 0x80, so UTF-8 letters stay whole), or a run of digits, or a run
//     of other non-space bytes (punctuation)
//   * a run of whitespace; when more text follows, its last byte is left to
//     the next chunk (a space there joins the following word: "a  b" splits
//     as "a", " ", " b"; "a\n\nb" as "a", "\n", "\n", "b")
//
// A chunk longer than kMaxChunkBytes is cut into pieces of that size, which
// bounds the work of training and encoding on pathological input (a
// megabyte with no space) at no cost on real text.
//
// The chunks of a text are contiguous and cover it exactly. Stateless and
// thread-safe.
#ifndef SMALLEM_CORPUS_PRETOKENIZER_H_
#define SMALLEM_CORPUS_PRETOKENIZER_H_

#include <cstddef>
#include <string_view>

namespace smallem {

inline constexpr size_t kMaxChunkBytes = 256;

// Returns the end of the chunk that starts at begin (begin < text.size()):
// a position in (begin, min(begin + kMaxChunkBytes, text.size())].
size_t ChunkEnd(std::string_view text, size_t begin);

// Calls fn(chunk) for every chunk of text, in order.
template <typename Fn>
void ForEachChunk(std::string_view text, Fn&& fn) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = ChunkEnd(text, begin);
    fn(text.substr(begin, end - begin));
    begin = end;
  }
}

}  // namespace smallem

#endif  // SMALLEM_CORPUS_PRETOKENIZER_H_
