// FuzzTokenizer: a tokenizer.json's text. A tokenizer FromJson accepts
// encodes any text into ids of its vocabulary and decodes them back to the
// same bytes (corpus/tokenizer.h promises both).
#include <string>
#include <string_view>

#include "base/check.h"
#include "corpus/tokenizer.h"
#include "fuzz/fuzz_targets.h"
#include "nlohmann/json.hpp"

namespace smallem::fuzz {

int FuzzTokenizer(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::FromJson(json, "fuzz.json");
  if (!tokenizer.ok()) return 0;
  // The input itself, as text to encode: arbitrary bytes.
  const std::vector<int32_t> ids = tokenizer->Encode(text.substr(0, 4096));
  for (int32_t id : ids) CHECK(id >= 0 && id < tokenizer->vocab_size()) << "id " << id;
  CHECK(tokenizer->Decode(ids) == text.substr(0, 4096)) << "Decode(Encode(s)) != s";
  return 0;
}

}  // namespace smallem::fuzz
