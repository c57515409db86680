#include "corpus/tokenizer.h"

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "corpus/pretokenizer.h"
#include "nlohmann/json.hpp"

namespace smallem {

// Chunks of up to kMaxCachedChunk bytes are cached during one Encode call: on
// text, a few thousand distinct words make up most of the chunks, so most
// chunks cost one hash lookup. The keys view the caller's text, which outlives
// the call.
struct Tokenizer::ChunkCache {
  static constexpr size_t kMaxCachedChunk = 64;
  absl::flat_hash_map<std::string_view, std::pair<uint32_t, uint32_t>> spans;
  std::vector<int32_t> ids;  // the cached chunks' ids, back to back
};

Tokenizer::Tokenizer() { BuildTables(); }

Tokenizer Tokenizer::FromMerges(std::vector<std::pair<int32_t, int32_t>> merges) {
  Tokenizer tokenizer;
  tokenizer.merges_ = std::move(merges);
  for (size_t k = 0; k < tokenizer.merges_.size(); ++k) {
    auto [a, b] = tokenizer.merges_[k];
    CHECK(a >= 0 && b >= 0 && a < 256 + static_cast<int64_t>(k) &&
          b < 256 + static_cast<int64_t>(k))
        << "merge " << k << " (" << a << ", " << b << ") refers to a later id";
  }
  tokenizer.BuildTables();
  CHECK_EQ(tokenizer.rank_.size(), tokenizer.merges_.size()) << "duplicate merge";
  return tokenizer;
}

void Tokenizer::BuildTables() {
  const size_t vocab = 256 + merges_.size() + specials_.size();
  rank_.clear();
  rank_.reserve(merges_.size());
  token_bytes_.assign(vocab, 0);
  token_offset_.assign(vocab, 0);
  blob_.clear();
  for (int id = 0; id < 256; ++id) {
    token_offset_[id] = static_cast<int64_t>(blob_.size());
    token_bytes_[id] = 1;
    blob_.push_back(static_cast<char>(id));
  }
  for (size_t k = 0; k < merges_.size(); ++k) {
    auto [a, b] = merges_[k];
    // Keep the first of duplicate pairs: a later duplicate never applies.
    rank_.try_emplace(PairKey(a, b), static_cast<int32_t>(k));
    const size_t id = 256 + k;
    token_offset_[id] = static_cast<int64_t>(blob_.size());
    token_bytes_[id] = token_bytes_[a] + token_bytes_[b];
    // Copy through a temporary: blob_ may reallocate while appending.
    std::string bytes(TokenText(a));
    bytes += TokenText(b);
    blob_ += bytes;
  }
  for (size_t s = 0; s < specials_.size(); ++s) {
    token_offset_[256 + merges_.size() + s] = static_cast<int64_t>(blob_.size());
  }
}

int32_t Tokenizer::AddSpecial(const std::string& name) {
  CHECK(!name.empty());
  for (const auto& [existing, id] : specials_) CHECK(existing != name) << name;
  const int32_t id = static_cast<int32_t>(vocab_size());
  specials_.emplace_back(name, id);
  token_bytes_.push_back(0);
  token_offset_.push_back(static_cast<int64_t>(blob_.size()));
  return id;
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  CHECK(id >= 0 && id < vocab_size()) << "token id " << id << " outside [0, "
                                      << vocab_size() << ")";
  return std::string_view(blob_).substr(token_offset_[id], token_bytes_[id]);
}

// --- Encoding ---

void Tokenizer::MergeChunk(std::vector<int32_t>& ids) const {
  // ranks[i] is the rank of the pair (ids[i], ids[i + 1]); kDirty marks a
  // pair changed by the last pass. Each pass applies the lowest-ranked merge
  // at every place it occurs, left to right (so "aaa" with a+a gives "Xa").
  // Pairs made by a merge of rank r can only merge at ranks above r, so the
  // order of passes matches the order of the merge list.
  constexpr int32_t kDirty = -1;
  size_t n = ids.size();
  if (n < 2) return;
  int32_t ranks_storage[kMaxChunkBytes];
  std::vector<int32_t> ranks_heap;
  int32_t* ranks = ranks_storage;
  if (n > kMaxChunkBytes) {
    ranks_heap.resize(n);
    ranks = ranks_heap.data();
  }
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = kDirty;
  ranks[n - 1] = kNoMerge;
  while (n > 1) {
    int32_t best = kNoMerge;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] == kDirty) ranks[i] = Rank(ids[i], ids[i + 1]);
      best = std::min(best, ranks[i]);
    }
    if (best == kNoMerge) break;
    const auto [a, b] = merges_[best];
    const int32_t merged = 256 + best;
    size_t j = 0;
    for (size_t i = 0; i < n; ++j) {
      if (i + 1 < n && ranks[i] == best && ids[i] == a && ids[i + 1] == b) {
        ids[j] = merged;
        ranks[j] = kDirty;
        if (j > 0) ranks[j - 1] = kDirty;
        i += 2;
      } else {
        ids[j] = ids[i];
        ranks[j] = ranks[i];
        ++i;
      }
    }
    n = j;
    ranks[n - 1] = kNoMerge;
  }
  ids.resize(n);
}

void Tokenizer::EncodeInto(std::string_view text, ChunkCache& cache,
                           std::vector<int32_t>& out) const {
  std::vector<int32_t> chunk_ids;
  ForEachChunk(text, [&](std::string_view chunk) {
    if (chunk.size() == 1) {
      out.push_back(static_cast<uint8_t>(chunk[0]));
      return;
    }
    const bool cacheable = chunk.size() <= ChunkCache::kMaxCachedChunk;
    if (cacheable) {
      auto it = cache.spans.find(chunk);
      if (it != cache.spans.end()) {
        auto [offset, length] = it->second;
        out.insert(out.end(), cache.ids.begin() + offset,
                   cache.ids.begin() + offset + length);
        return;
      }
    }
    chunk_ids.assign(chunk.begin(), chunk.end());
    for (int32_t& id : chunk_ids) id = static_cast<uint8_t>(id);
    MergeChunk(chunk_ids);
    out.insert(out.end(), chunk_ids.begin(), chunk_ids.end());
    if (cacheable) {
      cache.spans.emplace(chunk, std::make_pair(static_cast<uint32_t>(cache.ids.size()),
                                                static_cast<uint32_t>(chunk_ids.size())));
      cache.ids.insert(cache.ids.end(), chunk_ids.begin(), chunk_ids.end());
    }
  });
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  ChunkCache cache;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 16);
  EncodeInto(text, cache, out);
  return out;
}

std::vector<int32_t> Tokenizer::EncodeAll(
    const std::vector<std::string_view>& texts) const {
  ChunkCache cache;
  size_t total = 0;
  for (std::string_view text : texts) total += text.size();
  std::vector<int32_t> out;
  out.reserve(total / 3 + 16);
  for (std::string_view text : texts) EncodeInto(text, cache, out);
  return out;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  size_t size = 0;
  for (int32_t id : ids) {
    CHECK(id >= 0 && id < vocab_size()) << "token id " << id << " outside [0, "
                                        << vocab_size() << ")";
    size += token_bytes_[id];
  }
  std::string text;
  text.reserve(size);
  for (int32_t id : ids) text.append(blob_, token_offset_[id], token_bytes_[id]);
  return text;
}

// --- Files ---

nlohmann::json Tokenizer::ToJson() const {
  nlohmann::json merges = nlohmann::json::array();
  for (auto [a, b] : merges_) merges.push_back({a, b});
  nlohmann::json special = nlohmann::json::object();
  for (const auto& [name, id] : specials_) special[name] = id;
  return {{"type", "byte_bpe"}, {"merges", std::move(merges)},
          {"special", std::move(special)}};
}

absl::StatusOr<Tokenizer> Tokenizer::FromJson(const nlohmann::json& json,
                                              const std::string& origin) {
  auto invalid = [&](const auto&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", parts...));
  };
  if (!json.is_object()) return invalid("expected a JSON object");
  auto type = json.find("type");
  if (type == json.end() || !type->is_string() || *type != "byte_bpe") {
    return invalid("\"type\" is ", type == json.end() ? "missing" : type->dump(),
                   " (expected \"byte_bpe\")");
  }
  auto merges_json = json.find("merges");
  if (merges_json == json.end() || !merges_json->is_array()) {
    return invalid("\"merges\" must be an array of [a, b] pairs");
  }
  Tokenizer tokenizer;
  tokenizer.merges_.reserve(merges_json->size());
  absl::flat_hash_map<uint64_t, size_t> seen;
  for (size_t k = 0; k < merges_json->size(); ++k) {
    const nlohmann::json& pair = (*merges_json)[k];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
        !pair[1].is_number_integer()) {
      return invalid("merge ", k, " is ", pair.dump(), " (expected [a, b] with integer ids)");
    }
    const int64_t a = pair[0].get<int64_t>(), b = pair[1].get<int64_t>();
    const int64_t limit = 256 + static_cast<int64_t>(k);
    if (a < 0 || b < 0 || a >= limit || b >= limit) {
      return invalid("merge ", k, " is ", pair.dump(), ": ids must be in [0, ", limit,
                     ") (a merge may only join ids defined before it)");
    }
    auto [it, inserted] = seen.try_emplace(PairKey(a, b), k);
    if (!inserted) {
      return invalid("merge ", k, " ", pair.dump(), " repeats merge ", it->second);
    }
    tokenizer.merges_.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
  }
  const int64_t first_special = 256 + static_cast<int64_t>(tokenizer.merges_.size());
  if (auto special = json.find("special"); special != json.end() && !special->is_null()) {
    if (!special->is_object()) return invalid("\"special\" must be an object {name: id}");
    std::vector<std::string> names(special->size());
    for (const auto& [name, id] : special->items()) {
      const int64_t index = id.is_number_integer() ? id.get<int64_t>() - first_special : -1;
      if (index < 0 || index >= static_cast<int64_t>(names.size()) || !names[index].empty() ||
          name.empty()) {
        return invalid("special token \"", name, "\" has id ", id.dump(),
                       " (special ids must be ", first_special, ", ", first_special + 1,
                       ", ... after the merges, each used once)");
      }
      names[index] = name;
    }
    for (size_t s = 0; s < names.size(); ++s) {
      tokenizer.specials_.emplace_back(names[s], static_cast<int32_t>(first_special + s));
    }
  }
  tokenizer.BuildTables();
  return tokenizer;
}

absl::StatusOr<Tokenizer> Tokenizer::Load(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string contents, ReadFile(path));
  nlohmann::json json = nlohmann::json::parse(contents, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not valid JSON (corrupt or truncated tokenizer file)"));
  }
  return FromJson(json, path);
}

absl::Status Tokenizer::Save(const std::string& path) const {
  return WriteFileDurably(path, ToJson().dump() + "\n");
}

}  // namespace smallem
