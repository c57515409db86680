#include "corpus/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "corpus/bpe_trainer.h"
#include "corpus/dataset_format.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

// A fixed mix of the document index (SplitMix64's finalizer): decides which
// documents are held out, independently of their content and of any seed.
uint64_t MixIndex(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Token ids as little-endian uint16 bytes.
std::string TokensToBytes(const std::vector<int32_t>& ids) {
  std::string bytes(ids.size() * 2, '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(ids[i] >= 0 && ids[i] < kMaxDatasetVocab);
    bytes[2 * i] = static_cast<char>(ids[i] & 0xff);
    bytes[2 * i + 1] = static_cast<char>(ids[i] >> 8);
  }
  return bytes;
}

std::vector<uint16_t> BytesToTokens(std::string_view bytes) {
  std::vector<uint16_t> tokens(bytes.size() / 2);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint16_t>(static_cast<uint8_t>(bytes[2 * i]) |
                                      (static_cast<uint8_t>(bytes[2 * i + 1]) << 8));
  }
  return tokens;
}

// Encodes documents back to back, each ending with a blank line, reporting
// progress as it goes.
std::vector<int32_t> EncodeDocuments(const Tokenizer& tokenizer,
                                     const std::vector<const Document*>& documents,
                                     const ProgressFn& progress, double progress_begin,
                                     double progress_end, int64_t total_bytes) {
  std::vector<int32_t> ids;
  // Batches of about 1 MB share one chunk cache (small documents gain most).
  constexpr size_t kBatchBytes = 1 << 20;
  std::vector<std::string> batch;
  size_t batch_bytes = 0;
  // Progress counts the documents' own bytes, as total_bytes does — not the
  // blank lines added between them (which took many small documents past
  // 100%).
  int64_t batch_text_bytes = 0;
  int64_t done = 0;
  auto flush = [&] {
    std::vector<std::string_view> views(batch.begin(), batch.end());
    std::vector<int32_t> encoded = tokenizer.EncodeAll(views);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    done += batch_text_bytes;
    batch.clear();
    batch_bytes = 0;
    batch_text_bytes = 0;
    if (progress && total_bytes > 0) {
      progress("encode", progress_begin + (progress_end - progress_begin) *
                                              static_cast<double>(done) / total_bytes);
    }
  };
  for (const Document* document : documents) {
    batch_text_bytes += static_cast<int64_t>(document->text.size());
    std::string text = document->text;
    if (text.empty() || text.back() != '\n') text.push_back('\n');
    text.push_back('\n');
    batch_bytes += text.size();
    batch.push_back(std::move(text));
    if (batch_bytes >= kBatchBytes) flush();
  }
  if (!batch.empty()) flush();
  return ids;
}

int64_t CountBytes(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  int64_t bytes = 0;
  for (int32_t id : ids) bytes += tokenizer.token_bytes()[id];
  return bytes;
}

absl::Status CheckOptions(const PrepareOptions& options) {
  if (options.vocab < 256 || options.vocab > kMaxDatasetVocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary size ", options.vocab, " is out of range: it must be in [256, ",
        kMaxDatasetVocab, "] (256 byte tokens at least; token ids are stored as uint16)"));
  }
  if (!(options.val_fraction > 0 && options.val_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation fraction ", options.val_fraction, " must be in (0, 1)"));
  }
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("no output directory given (--out DIR)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PrepareDatasetFromCorpus(const Corpus& corpus, const PrepareOptions& options,
                                      const ProgressFn& progress) {
  RETURN_IF_ERROR(CheckOptions(options));
  const size_t n = corpus.documents.size();
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the corpus has ", n, " document", n == 1 ? "" : "s",
        "; at least 2 are needed, since validation text is held out by document "
        "(one document per file: pass several files)"));
  }

  // Hold out the documents whose index hashes lowest.
  const size_t num_val = std::clamp<size_t>(
      static_cast<size_t>(std::llround(options.val_fraction * n)), 1, n - 1);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [](size_t a, size_t b) { return MixIndex(a) < MixIndex(b); });
  std::vector<bool> is_val(n, false);
  for (size_t k = 0; k < num_val; ++k) is_val[order[k]] = true;
  std::vector<const Document*> train_documents, val_documents;
  std::vector<std::string_view> train_texts;
  int64_t train_text_bytes = 0, val_text_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Document& document = corpus.documents[i];
    if (is_val[i]) {
      val_documents.push_back(&document);
      val_text_bytes += document.text.size();
    } else {
      train_documents.push_back(&document);
      train_texts.push_back(document.text);
      train_text_bytes += document.text.size();
    }
  }

  ASSIGN_OR_RETURN(const Tokenizer tokenizer, TrainBpe(train_texts, options.vocab, progress));

  const int64_t total_bytes = train_text_bytes + val_text_bytes;
  const double train_share =
      total_bytes == 0 ? 0.5 : static_cast<double>(train_text_bytes) / total_bytes;
  std::vector<int32_t> train_ids =
      EncodeDocuments(tokenizer, train_documents, progress, 0, train_share, train_text_bytes);
  std::vector<int32_t> val_ids =
      EncodeDocuments(tokenizer, val_documents, progress, train_share, 1, val_text_bytes);
  if (progress) progress("encode", 1.0);

  const fs::path dir = options.out_dir;
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the output directory ",
                                                    dir.string(), ": ", error.message()));
  }
  // meta.json goes last and first goes away: a directory with a meta.json is
  // complete.
  fs::remove(dir / kMetaFile, error);
  if (progress) progress("write", 0.0);
  const std::string tokenizer_text = tokenizer.ToJson().dump() + "\n";
  const std::string train_bytes = TokensToBytes(train_ids);
  const std::string val_bytes = TokensToBytes(val_ids);
  for (const auto& [name, contents] :
       {std::pair<const char*, const std::string*>{kTokenizerFile, &tokenizer_text},
        {kTrainFile, &train_bytes},
        {kValFile, &val_bytes}}) {
    RETURN_IF_ERROR(WriteFileDurably((dir / name).string(), *contents));
  }
  const std::string tokenizer_sha = Sha256Hex(tokenizer_text);
  const std::string train_sha = Sha256Hex(train_bytes);
  const std::string val_sha = Sha256Hex(val_bytes);

  const int64_t train_decoded = CountBytes(tokenizer, train_ids);
  const int64_t val_decoded = CountBytes(tokenizer, val_ids);
  const int64_t tokens = static_cast<int64_t>(train_ids.size() + val_ids.size());
  nlohmann::json val_names = nlohmann::json::array();
  for (const Document* document : val_documents) val_names.push_back(document->name);
  nlohmann::json meta = {
      {"vocab", tokenizer.vocab_size()},
      {"train_tokens", train_ids.size()},
      {"val_tokens", val_ids.size()},
      {"train_bytes", train_decoded},
      {"val_bytes", val_decoded},
      {"bytes_per_token",
       tokens == 0 ? 0.0 : static_cast<double>(train_decoded + val_decoded) / tokens},
      {"train_documents", train_documents.size()},
      {"val_documents", val_documents.size()},
      {"val_document_names", std::move(val_names)},
      {"source", corpus.source},
      {"sha256", {{kTokenizerFile, tokenizer_sha}, {kTrainFile, train_sha}, {kValFile, val_sha}}},
      {"content_hash", DatasetContentHash(tokenizer_sha, train_sha, val_sha)},
  };
  RETURN_IF_ERROR(WriteFileDurably((dir / kMetaFile).string(), meta.dump(2) + "\n"));
  if (progress) progress("write", 1.0);
  return absl::OkStatus();
}

absl::Status PrepareDataset(const PrepareOptions& options, const ProgressFn& progress) {
  // Checked before fetching the corpus, so a typo fails at once.
  RETURN_IF_ERROR(CheckOptions(options));
  ASSIGN_OR_RETURN(const Corpus corpus, options.files.empty()
                                            ? LoadDefaultCorpus(options.corpus, progress)
                                            : LoadTextFiles(options.files));
  return PrepareDatasetFromCorpus(corpus, options, progress);
}

absl::StatusOr<Dataset> Dataset::Open(const std::string& dir_name, bool verify_hashes) {
  const fs::path dir = dir_name;
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat(
        dir_name, ": no such dataset directory (create one with `smallemctl data prepare "
                  "--out ", dir_name, "`)"));
  }
  const fs::path meta_path = dir / kMetaFile;
  if (!fs::exists(meta_path, error)) {
    return absl::NotFoundError(absl::StrCat(
        meta_path.string(), ": not found: ", dir_name,
        " is not a complete dataset (re-run `smallemctl data prepare --out ", dir_name, "`)"));
  }
  ASSIGN_OR_RETURN(const std::string meta_text, ReadFile(meta_path.string()));
  Dataset dataset;
  dataset.dir = dir_name;
  dataset.meta = nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  auto corrupt = [](const fs::path& path, const auto&... parts) {
    return absl::DataLossError(absl::StrCat(path.string(), ": ", parts...,
                                            " (corrupt dataset: re-run smallemctl data prepare)"));
  };
  const nlohmann::json& meta = dataset.meta;
  if (meta.is_discarded() || !meta.is_object()) return corrupt(meta_path, "not valid JSON");
  for (const char* field : {"vocab", "train_tokens", "val_tokens"}) {
    if (!meta.contains(field) || !meta[field].is_number_unsigned()) {
      return corrupt(meta_path, "field \"", field, "\" is missing or not a count");
    }
  }

  const fs::path tokenizer_path = dir / kTokenizerFile;
  ASSIGN_OR_RETURN(const std::string tokenizer_text, ReadFile(tokenizer_path.string()));
  std::string token_bytes[2];  // train.bin, val.bin
  const std::tuple<const char*, const char*, std::vector<uint16_t>*> splits[2] = {
      {kTrainFile, "train_tokens", &dataset.train}, {kValFile, "val_tokens", &dataset.val}};
  for (int s = 0; s < 2; ++s) {
    const auto& [name, field, tokens] = splits[s];
    const fs::path path = dir / name;
    ASSIGN_OR_RETURN(token_bytes[s], ReadFile(path.string()));
    // Sizes first: a truncated file says so, rather than that its hash differs.
    if (token_bytes[s].size() % 2 != 0) {
      return corrupt(path, "size ", token_bytes[s].size(),
                     " bytes is odd, but tokens are 2 bytes each (truncated?)");
    }
    const uint64_t expected = meta[field].get<uint64_t>();
    if (token_bytes[s].size() / 2 != expected) {
      return corrupt(path, "holds ", token_bytes[s].size() / 2, " tokens but meta.json says ",
                     expected, " (truncated?)");
    }
  }
  if (verify_hashes) {
    const DatasetFileHashes computed{.tokenizer = Sha256Hex(tokenizer_text),
                                     .train = Sha256Hex(token_bytes[0]),
                                     .val = Sha256Hex(token_bytes[1])};
    if (absl::Status verified = VerifyDatasetHashes(meta, computed); !verified.ok()) {
      return corrupt(dir, verified.message());
    }
  }

  nlohmann::json tokenizer_json =
      nlohmann::json::parse(tokenizer_text, nullptr, /*allow_exceptions=*/false);
  if (tokenizer_json.is_discarded()) return corrupt(tokenizer_path, "not valid JSON");
  auto tokenizer = Tokenizer::FromJson(tokenizer_json, tokenizer_path.string());
  if (!tokenizer.ok()) return corrupt(tokenizer_path, tokenizer.status().message());
  dataset.tokenizer = *std::move(tokenizer);
  const int64_t vocab = dataset.tokenizer.vocab_size();
  if (meta["vocab"].get<int64_t>() != vocab) {
    return corrupt(meta_path, "vocab is ", meta["vocab"].dump(), " but ",
                   tokenizer_path.string(), " defines ", vocab, " ids");
  }

  for (int s = 0; s < 2; ++s) {
    const auto& [name, field, tokens] = splits[s];
    *tokens = BytesToTokens(token_bytes[s]);
    token_bytes[s] = std::string();  // the tokens hold them now
    for (size_t i = 0; i < tokens->size(); ++i) {
      if ((*tokens)[i] >= vocab) {
        return corrupt(dir / name, "token ", i, " is id ", (*tokens)[i],
                       ", outside the vocabulary of ", vocab);
      }
    }
  }
  return dataset;
}

}  // namespace smallem
