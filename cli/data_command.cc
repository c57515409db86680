#include "cli/data_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/exit_codes.h"
#include "base/text.h"
#include "cli/progress.h"
#include "corpus/dataset.h"

namespace smallem {
namespace {

// What a person reads for each stage of PrepareDataset.
const char* StageLabel(std::string_view stage) {
  if (stage == "fetch") return "fetching corpus";
  if (stage == "count") return "counting words";
  if (stage == "merge") return "learning merges";
  if (stage == "encode") return "encoding";
  if (stage == "write") return "writing";
  return "working";
}

// 12345678 -> "12,345,678".
std::string WithCommas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return value < 0 ? "-" + out : out;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int RunDataPrepare(const DataPrepareArgs& args) {
  PrepareOptions options;
  options.vocab = args.vocab;
  options.out_dir = args.out.empty() ? "data" : args.out;
  if (!args.corpus.empty() && args.corpus != "default") options.files.push_back(args.corpus);
  options.files.insert(options.files.end(), args.files.begin(), args.files.end());

  const auto start = std::chrono::steady_clock::now();
  ProgressLine line(stderr);
  std::string current_stage;
  auto stage_start = start;
  int last_percent = -1;
  auto progress = [&](std::string_view stage, double fraction) {
    const bool new_stage = stage != current_stage;
    if (new_stage) {
      current_stage = std::string(stage);
      stage_start = std::chrono::steady_clock::now();
      last_percent = -1;
    }
    fraction = std::clamp(fraction, 0.0, 1.0);  // a stage's estimate may overshoot
    const int percent = static_cast<int>(fraction * 100);
    if (percent == last_percent) return;
    last_percent = percent;
    const bool done = fraction >= 1.0;
    std::string text = absl::StrFormat("%-16s %s %3d%%", StageLabel(stage),
                                       FormatBar(fraction), percent);
    if (done) text += absl::StrFormat("  (%.1f s)", Seconds(stage_start));
    // On a terminal the line updates in place; in a log, each stage shows
    // its start and its end (and a line every few seconds between).
    line.Update(text, /*force=*/new_stage || done);
  };

  const absl::Status status = PrepareDataset(options, progress);
  line.Finish();
  if (!status.ok()) return ReportError(status);
  auto dataset = Dataset::Open(options.out_dir);
  if (!dataset.ok()) {
    std::fprintf(stderr, "error: the dataset was written but does not open: %s\n",
                 std::string(dataset.status().message()).c_str());
    return kExitError;
  }
  const nlohmann::json& meta = dataset->meta;
  const int64_t train_bytes = meta.value("train_bytes", int64_t{0});
  const int64_t val_bytes = meta.value("val_bytes", int64_t{0});
  std::printf("Prepared %s in %.1f s\n", options.out_dir.c_str(), Seconds(start));
  std::printf("  source:          %s\n", meta.value("source", "").c_str());
  std::printf("  vocabulary:      %s tokens%s\n", WithCommas(dataset->vocab()).c_str(),
              dataset->vocab() < args.vocab ? " (the corpus ran out of pairs to merge)" : "");
  std::printf("  train:           %s tokens (%.1f MB of text, %s)\n",
              WithCommas(static_cast<int64_t>(dataset->train.size())).c_str(),
              train_bytes / 1e6,
              CountedNoun(meta.value("train_documents", int64_t{0}), "document", "documents")
                  .c_str());
  std::printf("  validation:      %s tokens (%.1f MB of text, %s)\n",
              WithCommas(static_cast<int64_t>(dataset->val.size())).c_str(), val_bytes / 1e6,
              CountedNoun(meta.value("val_documents", int64_t{0}), "document", "documents")
                  .c_str());
  std::printf("  bytes per token: %.3f\n", meta.value("bytes_per_token", 0.0));
  std::printf("  content hash:    %s\n", dataset->content_hash().c_str());
  std::printf("\nNext: smallemctl train --data %s\n", options.out_dir.c_str());
  return 0;
}

}  // namespace smallem
