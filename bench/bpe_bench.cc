// bpe_bench: tokenizer training and encoding speed on the default corpus.
//
//   smallem_bpe_bench [VOCAB]      (default 8192)
//
// Fetches the default corpus (or reads the cache), trains a byte-level BPE of
// VOCAB ids on all of it, then encodes it per document with Encode and all at
// once with EncodeAll (one chunk cache), and 8 MB of random bytes (the cache's
// worst case), decodes it back and checks the round trip. Targets: training under 60 s, encoding at 5 MB/s or more, on the
// 2-core development machine. Prints one table.
#include <chrono>
#include <cstdio>
#include <random>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/bpe_trainer.h"
#include "corpus/corpus.h"
#include "corpus/tokenizer.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t vocab = argc > 1 ? std::atoll(argv[1]) : 8192;
  auto start = std::chrono::steady_clock::now();
  auto corpus = smallem::LoadDefaultCorpus();
  if (!corpus.ok()) {
    std::fprintf(stderr, "bpe_bench: %s\n", std::string(corpus.status().message()).c_str());
    return 1;
  }
  const double load_seconds = Seconds(start);
  std::vector<std::string_view> texts;
  for (const auto& document : corpus->documents) texts.push_back(document.text);
  const double megabytes = static_cast<double>(corpus->bytes()) / 1e6;

  start = std::chrono::steady_clock::now();
  auto tokenizer = smallem::TrainBpe(texts, vocab);
  const double train_seconds = Seconds(start);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "bpe_bench: %s\n", std::string(tokenizer.status().message()).c_str());
    return 1;
  }

  start = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  for (std::string_view text : texts) {
    std::vector<int32_t> ids = tokenizer->Encode(text);
    tokens += static_cast<int64_t>(ids.size());
  }
  const double encode_seconds = Seconds(start);

  start = std::chrono::steady_clock::now();
  std::vector<int32_t> all = tokenizer->EncodeAll(texts);
  const double encode_all_seconds = Seconds(start);

  // Worst case for the chunk cache: random bytes (few repeats, long chunks).
  std::mt19937 rng(1);
  std::string noise(8 << 20, '\0');
  for (char& c : noise) c = static_cast<char>(rng() & 0xff);
  start = std::chrono::steady_clock::now();
  const size_t noise_tokens = tokenizer->Encode(noise).size();
  const double noise_seconds = Seconds(start);

  start = std::chrono::steady_clock::now();
  std::string decoded = tokenizer->Decode(all);
  const double decode_seconds = Seconds(start);
  std::string joined;
  for (std::string_view text : texts) joined.append(text);
  const bool round_trip = decoded == joined;

  std::printf("%-34s %12s\n", "measure", "value");
  std::printf("%-34s %12zu\n", "documents", corpus->documents.size());
  std::printf("%-34s %12.2f\n", "corpus MB (after cleaning)", megabytes);
  std::printf("%-34s %12.2f\n", "corpus load s (fetch on first run)", load_seconds);
  std::printf("%-34s %12lld\n", "vocab", static_cast<long long>(tokenizer->vocab_size()));
  std::printf("%-34s %12.2f\n", "BPE training s", train_seconds);
  std::printf("%-34s %12lld\n", "tokens", static_cast<long long>(tokens));
  std::printf("%-34s %12.3f\n", "bytes per token", corpus->bytes() / static_cast<double>(tokens));
  std::printf("%-34s %12.1f\n", "Encode MB/s (per document)", megabytes / encode_seconds);
  std::printf("%-34s %12.1f\n", "EncodeAll MB/s (one cache)", megabytes / encode_all_seconds);
  std::printf("%-34s %12.1f\n", "Encode MB/s (random bytes)",
              noise.size() / 1e6 / noise_seconds);
  std::printf("%-34s %12.3f\n", "bytes per token (random bytes)",
              noise.size() / static_cast<double>(noise_tokens));
  std::printf("%-34s %12.1f\n", "Decode MB/s", megabytes / decode_seconds);
  std::printf("%-34s %12s\n", "round trip exact", round_trip ? "yes" : "NO");
  return round_trip ? 0 : 1;
}
