// Tokenizer: byte-level byte-pair encoding (BPE).
//
// Ids 0-255 are the bytes themselves. Merge k joins ids (a, b) into id
// 256 + k, whose bytes are bytes(a) followed by bytes(b); a merge only refers
// to ids defined before it. Special tokens (if any) follow the merges and have
// no bytes: Encode never produces them and Decode writes nothing for them.
//
// Encoding splits the text into chunks (corpus/pretokenizer.h), then
// within each chunk applies merges by rank, lowest first, until none applies.
// Every byte string encodes, and Decode(Encode(s)) == s exactly, whether or
// not s is valid UTF-8.
//
// File format (tokenizer.json, docs/architecture.md § The formats):
//   {"type": "byte_bpe", "merges": [[a, b], ...], "special": {"name": id}}
//
// A Tokenizer is an immutable value once built: its const methods may be
// called from several threads at once.
#ifndef SMALLEM_CORPUS_TOKENIZER_H_
#define SMALLEM_CORPUS_TOKENIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace smallem {

class Tokenizer {
 public:
  // A tokenizer with no merges: one token per byte.
  Tokenizer();

  // Reads a tokenizer.json. ReadFile's error when the file cannot be read
  // (NotFound when it is missing); InvalidArgument, naming the file and the faulty entry, when it is not a
  // valid byte_bpe tokenizer.
  static absl::StatusOr<Tokenizer> Load(const std::string& path);

  // Same, from parsed JSON; `origin` names the source in error messages.
  static absl::StatusOr<Tokenizer> FromJson(const nlohmann::json& json,
                                            const std::string& origin);

  // Writes tokenizer.json durably (WriteFileDurably: a reader never sees
  // half a file); its error otherwise.
  absl::Status Save(const std::string& path) const;
  nlohmann::json ToJson() const;

  // REQUIRES: merge k refers only to ids below 256 + k, and no pair appears
  // twice (CHECKed: merges built by code, not read from a file).
  static Tokenizer FromMerges(std::vector<std::pair<int32_t, int32_t>> merges);

  // Adds a special token (id vocab_size() before the call) and returns its
  // id. REQUIRES: the name is new and not empty.
  int32_t AddSpecial(const std::string& name);

  // 256 + merges + specials.
  int64_t vocab_size() const { return static_cast<int64_t>(token_bytes_.size()); }
  int64_t num_merges() const { return static_cast<int64_t>(merges_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }
  // Name and id of each special token, in id order.
  const std::vector<std::pair<std::string, int32_t>>& specials() const { return specials_; }

  // Token ids of text. Never fails.
  std::vector<int32_t> Encode(std::string_view text) const;

  // Each text encoded in turn, concatenated, sharing one chunk cache (faster
  // than calling Encode per text when the texts are many and small).
  std::vector<int32_t> EncodeAll(const std::vector<std::string_view>& texts) const;

  // The bytes of ids, concatenated. REQUIRES: 0 <= id < vocab_size() for
  // every id (CHECKed).
  std::string Decode(std::span<const int32_t> ids) const;

  // The bytes of one token ("" for a special token). REQUIRES: id valid.
  std::string_view TokenText(int32_t id) const;

  // Number of bytes of each id (0 for special tokens): the denominator of
  // nats per byte.
  const std::vector<int32_t>& token_bytes() const { return token_bytes_; }

 private:
  // Chunk text -> (offset, length) of its ids in the cache's id arena.
  struct ChunkCache;

  void EncodeInto(std::string_view text, ChunkCache& cache,
                  std::vector<int32_t>& out) const;
  // Applies the merges to one chunk; ids holds its bytes on entry.
  void MergeChunk(std::vector<int32_t>& ids) const;
  // Rank (index) of the merge of (a, b), or kNoMerge.
  static constexpr int32_t kNoMerge = INT32_MAX;
  int32_t Rank(int32_t a, int32_t b) const {
    auto it = rank_.find(PairKey(a, b));
    return it == rank_.end() ? kNoMerge : it->second;
  }
  // Rebuilds rank_ and the token tables from merges_ and specials_.
  void BuildTables();
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
           static_cast<uint32_t>(b);
  }

  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::pair<std::string, int32_t>> specials_;
  absl::flat_hash_map<uint64_t, int32_t> rank_;  // PairKey -> merge index
  std::vector<int32_t> token_bytes_;             // (vocab) byte count per id
  std::vector<int64_t> token_offset_;            // (vocab) offset in blob_
  std::string blob_;                             // every token's bytes
};

}  // namespace smallem

#endif  // SMALLEM_CORPUS_TOKENIZER_H_
