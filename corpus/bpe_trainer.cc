#include "corpus/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "corpus/pretokenizer.h"

namespace smallem {
namespace {

// A distinct chunk of the corpus, as its current ids, and how often it occurs.
struct Word {
  std::vector<int32_t> ids;
  int64_t count = 0;
};

using PairKey = uint64_t;  // (a << 32) | b

PairKey MakeKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
         static_cast<uint32_t>(b);
}
int32_t First(PairKey key) { return static_cast<int32_t>(key >> 32); }
int32_t Second(PairKey key) { return static_cast<int32_t>(key & 0xffffffffu); }

// Max-heap order: the highest count first, then the smallest pair.
struct HeapEntry {
  int64_t count;
  PairKey key;
  bool operator<(const HeapEntry& other) const {
    return count != other.count ? count < other.count : key > other.key;
  }
};

// Counts the distinct chunks of the documents. The keys view the documents.
std::vector<Word> CountWords(const std::vector<std::string_view>& documents,
                             const ProgressFn& progress) {
  size_t total = 0;
  for (std::string_view document : documents) total += document.size();
  absl::flat_hash_map<std::string_view, int64_t> counts;
  size_t done = 0, next_report = 0;
  for (std::string_view document : documents) {
    ForEachChunk(document, [&](std::string_view chunk) {
      // One-byte chunks hold no pair: they cannot affect any merge.
      if (chunk.size() > 1) ++counts[chunk];
    });
    done += document.size();
    if (progress && done >= next_report) {
      progress("count", total == 0 ? 1.0 : static_cast<double>(done) / total);
      next_report = done + total / 100;
    }
  }
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [chunk, count] : counts) {
    Word word;
    word.ids.assign(chunk.begin(), chunk.end());
    for (int32_t& id : word.ids) id = static_cast<uint8_t>(id);
    word.count = count;
    words.push_back(std::move(word));
  }
  if (progress) progress("count", 1.0);
  return words;
}

// Replaces each (a, b) of word, left to right, by merged, and adds to deltas
// the change of every pair count it causes (times the word's count). Calls
// on_new_pair(key) for each pair that now contains merged.
template <typename OnNewPair>
void MergeWord(Word& word, int32_t a, int32_t b, int32_t merged,
               absl::flat_hash_map<PairKey, int64_t>& deltas, OnNewPair&& on_new_pair) {
  std::vector<int32_t>& ids = word.ids;
  const size_t n = ids.size();
  const int64_t count = word.count;
  size_t j = 0;
  for (size_t i = 0; i < n; ++j) {
    if (i + 1 < n && ids[i] == a && ids[i + 1] == b) {
      // (prev, a) becomes (prev, merged) and (b, next) becomes (merged,
      // next). When two merges are adjacent ("abab"), the (merged, a) pair
      // counted by the first is removed again by the second as (prev, a).
      if (j > 0) {
        const int32_t prev = ids[j - 1];
        deltas[MakeKey(prev, a)] -= count;
        deltas[MakeKey(prev, merged)] += count;
        on_new_pair(MakeKey(prev, merged));
      }
      if (i + 2 < n) {
        const int32_t next = ids[i + 2];
        deltas[MakeKey(b, next)] -= count;
        deltas[MakeKey(merged, next)] += count;
        on_new_pair(MakeKey(merged, next));
      }
      ids[j] = merged;
      i += 2;
    } else {
      ids[j] = ids[i];
      ++i;
    }
  }
  ids.resize(j);
}

}  // namespace

absl::StatusOr<Tokenizer> TrainBpe(const std::vector<std::string_view>& documents,
                                   int64_t vocab_size, const ProgressFn& progress,
                                   const BpeTrainOptions& options) {
  if (vocab_size < 256 || vocab_size > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary size ", vocab_size, " is invalid: a byte-level tokenizer needs at "
        "least 256 ids (one per byte)"));
  }
  std::vector<Word> words = CountWords(documents, progress);

  // Initial pair counts and the pair -> words index. A list may name a word
  // twice or name a word that no longer holds the pair: readers check.
  absl::flat_hash_map<PairKey, int64_t> counts;
  absl::flat_hash_map<PairKey, std::vector<int32_t>> where;
  for (size_t w = 0; w < words.size(); ++w) {
    const Word& word = words[w];
    for (size_t i = 0; i + 1 < word.ids.size(); ++i) {
      const PairKey key = MakeKey(word.ids[i], word.ids[i + 1]);
      counts[key] += word.count;
      std::vector<int32_t>& list = where[key];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) {
        list.push_back(static_cast<int32_t>(w));
      }
    }
  }
  std::vector<HeapEntry> entries;
  entries.reserve(counts.size());
  for (const auto& [key, count] : counts) entries.push_back({count, key});
  std::priority_queue<HeapEntry> heap(std::less<HeapEntry>(), std::move(entries));

  const int64_t target = vocab_size - 256;
  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(target);
  std::vector<int32_t> visited(words.size(), -1);  // merge index that last saw the word
  absl::flat_hash_map<PairKey, int64_t> deltas;
  int64_t next_report = 0;
  while (static_cast<int64_t>(merges.size()) < target && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    auto count_it = counts.find(top.key);
    const int64_t actual = count_it == counts.end() ? 0 : count_it->second;
    if (actual != top.count) {
      // Stale: the count fell since this entry was pushed. (Rises push a
      // fresh entry, so no entry is ever below its pair's count.)
      if (actual >= options.min_pair_count && actual < top.count) {
        heap.push({actual, top.key});
      }
      continue;
    }
    if (actual < options.min_pair_count) break;

    const int32_t a = First(top.key), b = Second(top.key);
    const int32_t merged = 256 + static_cast<int32_t>(merges.size());
    const int32_t merge_index = static_cast<int32_t>(merges.size());
    merges.emplace_back(a, b);
    counts.erase(count_it);
    std::vector<int32_t> holders = std::move(where[top.key]);
    where.erase(top.key);

    deltas.clear();
    for (int32_t w : holders) {
      if (visited[w] == merge_index) continue;
      visited[w] = merge_index;
      MergeWord(words[w], a, b, merged, deltas, [&](PairKey key) {
        std::vector<int32_t>& list = where[key];
        if (list.empty() || list.back() != w) list.push_back(w);
      });
    }
    for (const auto& [key, delta] : deltas) {
      if (key == top.key || delta == 0) continue;
      auto it = counts.find(key);
      const int64_t updated = (it == counts.end() ? 0 : it->second) + delta;
      CHECK_GE(updated, 0) << "pair count went negative";
      if (updated == 0) {
        if (it != counts.end()) counts.erase(it);
        where.erase(key);
        continue;
      }
      if (it == counts.end()) {
        counts.emplace(key, updated);
      } else {
        it->second = updated;
      }
      if (delta > 0) heap.push({updated, key});
    }
    if (progress && merge_index >= next_report) {
      progress("merge", static_cast<double>(merge_index + 1) / target);
      next_report = merge_index + std::max<int64_t>(1, target / 200);
    }
  }
  if (progress) progress("merge", 1.0);
  return Tokenizer::FromMerges(std::move(merges));
}

}  // namespace smallem
