#include "server/service/dataset_upload.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "corpus/dataset_format.h"
#include "nlohmann/json.hpp"

namespace smallem {

absl::Status DatasetUpload::Add(std::string_view content_hash, const DatasetChunkRef& where,
                                std::string_view data) {
  if (content_hash_.empty()) {
    if (content_hash.empty()) return absl::InvalidArgumentError("content_hash: required");
    content_hash_ = std::string(content_hash);
    ASSIGN_OR_RETURN(std::optional<int64_t> bytes, store_->DatasetBytes(content_hash_));
    already_present_ = bytes.has_value();
  } else if (content_hash != content_hash_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one upload carries one dataset: got ", std::string(content_hash), " after ",
        content_hash_));
  }
  if (already_present_) return absl::OkStatus();
  if (!IsDatasetFileName(where.file_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file_name \"", where.file_name,
        "\": a dataset holds meta.json, tokenizer.json, train.bin and val.bin only"));
  }
  if (static_cast<int64_t>(data.size()) > kDatasetChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("chunk of ", data.size(),
                                                   " bytes; the limit is ", kDatasetChunkBytes));
  }
  if (where.file_size > kDatasetFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where.file_name, ": ", where.file_size,
                                                   " bytes; a dataset file holds at most ",
                                                   kDatasetFileBytes));
  }
  // Written so that no sum can overflow: offset may be anything a client
  // sends (2^63 - 1 included); file_size is bounded above.
  if (where.offset < 0 || where.file_size < 0 ||
      where.offset > where.file_size - static_cast<int64_t>(data.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        where.file_name, ": chunk at offset ", where.offset, " of ", data.size(),
        " bytes does not fit a file of ", where.file_size, " bytes"));
  }
  // Every chunk, not only a file's first: a client may start anywhere.
  RETURN_IF_ERROR(CheckRoomFor(where));
  absl::Status put = store_->PutDatasetChunk(content_hash_, where, data, clock_->NowUnixMs());
  if (absl::IsFailedPrecondition(put)) {
    // Another upload of the same dataset may have completed it meanwhile:
    // then this one has nothing left to send.
    ASSIGN_OR_RETURN(std::optional<int64_t> bytes, store_->DatasetBytes(content_hash_));
    if (bytes.has_value()) {
      already_present_ = true;
      return absl::OkStatus();
    }
  }
  return put;
}

absl::Status DatasetUpload::CheckRoomFor(const DatasetChunkRef& where) const {
  const std::optional<int64_t> available = reserve_.Available();
  if (!available) return absl::OkStatus();  // unknown: SQLite reports a full disk itself
  // What is still to come of this file from here on, besides what uploads
  // in flight have claimed.
  const int64_t to_store = where.file_size - where.offset;
  const int64_t claimed = reserve_.claims ? reserve_.claims->claimed_bytes() : 0;
  if (*available - claimed - to_store >= reserve_.min_free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the coordinator's disk (", reserve_.dir, ") has ", HumanBytes(*available), " free",
      claimed > 0 ? absl::StrCat(", ", HumanBytes(claimed), " of it promised to uploads in flight")
                  : "",
      "; storing ", where.file_name, " (", HumanBytes(to_store),
      where.offset > 0 ? " still to come" : "", ") must leave at least ",
      HumanBytes(reserve_.min_free_bytes),
      ", kept for results (coordinator --min-free-disk-gb)"));
}

void DatasetUpload::Abandon() {
  if (content_hash_.empty() || already_present_) return;
  store_->DeleteIncompleteDataset(content_hash_).IgnoreError();
}

absl::StatusOr<UploadSummary> DatasetUpload::Finish() {
  if (content_hash_.empty()) return absl::InvalidArgumentError("the upload carried no chunk");
  if (already_present_) {
    ASSIGN_OR_RETURN(std::optional<int64_t> bytes, store_->DatasetBytes(content_hash_));
    return UploadSummary{.content_hash = content_hash_, .total_bytes = bytes.value_or(0),
                         .files = 4, .already_present = true};
  }
  const int64_t drops_before = store_->DatasetDrops();
  ASSIGN_OR_RETURN(std::vector<DatasetChunkRef> chunks, store_->ListDatasetChunks(content_hash_));
  absl::StatusOr<UploadSummary> summary = Verify(chunks);
  if (!summary.ok()) {
    // A bad upload is dropped whole; the client sends it again.
    store_->DeleteIncompleteDataset(content_hash_).IgnoreError();
    return summary.status();
  }
  // Hashing (up to gigabytes) stays outside the write transaction; the
  // completion checks, inside it, that the chunks are still those hashed.
  RETURN_IF_ERROR(store_->CompleteDataset(content_hash_, chunks, drops_before));
  return summary;
}

absl::StatusOr<UploadSummary> DatasetUpload::Verify(const std::vector<DatasetChunkRef>& chunks) {
  std::map<std::string, std::string> sha256;  // file → hex
  std::string meta_text;
  UploadSummary summary{.content_hash = content_hash_};
  size_t i = 0;
  while (i < chunks.size()) {
    const std::string file = chunks[i].file_name;
    const int64_t size = chunks[i].file_size;
    Sha256 hasher;
    int64_t offset = 0;
    for (; i < chunks.size() && chunks[i].file_name == file; ++i) {
      if (chunks[i].offset != offset || chunks[i].file_size != size) {
        return absl::DataLossError(absl::StrCat(
            "dataset ", content_hash_, ": ", file, " has a gap or overlap at offset ", offset));
      }
      ASSIGN_OR_RETURN(std::string data,
                       store_->ReadDatasetChunk(content_hash_, file, chunks[i].offset));
      hasher.Update(data);
      if (file == kMetaFile) meta_text += data;
      offset += chunks[i].length;
    }
    if (offset != size) {
      return absl::DataLossError(absl::StrCat("dataset ", content_hash_, ": ", file, " has ",
                                              offset, " of its ", size, " bytes"));
    }
    sha256[file] = Sha256::ToHex(hasher.Finish());
    summary.total_bytes += size;
    ++summary.files;
  }
  for (const char* f : kDatasetFiles) {
    if (!sha256.count(f)) {
      return absl::DataLossError(absl::StrCat("dataset ", content_hash_, ": ", f, " is missing"));
    }
  }
  const nlohmann::json meta =
      nlohmann::json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  const DatasetFileHashes computed{.tokenizer = sha256[kTokenizerFile],
                                   .train = sha256[kTrainFile],
                                   .val = sha256[kValFile]};
  if (absl::Status verified = VerifyDatasetHashes(meta, computed, content_hash_); !verified.ok()) {
    return absl::DataLossError(absl::StrCat("dataset ", content_hash_, ": ", verified.message()));
  }
  return summary;
}

}  // namespace smallem
