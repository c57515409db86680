// Text cleaning for the training corpus: pure functions from raw file bytes
// to the text a tokenizer is trained on. Stateless and thread-safe.
#ifndef SMALLEM_CORPUS_TEXT_CLEANING_H_
#define SMALLEM_CORPUS_TEXT_CLEANING_H_

#include <string>
#include <string_view>

namespace smallem {

// True when text is well-formed UTF-8 (no overlong forms, no surrogates).
bool IsValidUtf8(std::string_view text);

// Bytes read as ISO-8859-1 (Latin-1), written as UTF-8.
std::string Latin1ToUtf8(std::string_view text);

// "\r\n" and lone "\r" become "\n". Nothing else changes.
std::string NormalizeLineEndings(std::string_view text);

// Tidies whitespace: trailing spaces and tabs of each line removed, runs of
// blank lines cut to one, leading and trailing blank lines removed, and one
// final "\n" (an empty result stays empty). REQUIRES: "\n" line endings.
std::string TidyWhitespace(std::string_view text);

// A Project Gutenberg e-text as book text: UTF-8 (Latin-1 input is
// converted), "\n" line endings, the licence header (through the
// "*** START OF ..." line or the "*END*THE SMALL PRINT!" block) and footer
// (from "End of [the] Project Gutenberg ...", "*** END OF ..." or the small
// print) removed, markup removed (HTML tags, [Illustration] notes, _italic_
// underscores), whitespace tidied.
std::string CleanGutenbergText(std::string_view raw);

// A State of the Union transcript: UTF-8, "\n" line endings, audience notes
// ([Applause], [Laughter]) removed, whitespace tidied.
std::string CleanTranscriptText(std::string_view raw);

}  // namespace smallem

#endif  // SMALLEM_CORPUS_TEXT_CLEANING_H_
