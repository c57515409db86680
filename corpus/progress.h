// ProgressFn: how long-running data work (corpus download, tokenizer
// training, encoding) reports progress to whoever shows it.
#ifndef SMALLEM_CORPUS_PROGRESS_H_
#define SMALLEM_CORPUS_PROGRESS_H_

#include <functional>
#include <string_view>

namespace smallem {

// Called with a short stage name ("fetch", "clean", "count", "merge",
// "encode", "write") and the fraction of that stage done, in [0, 1]; each
// stage reports 1 when it ends. May be empty (no reports). Called on the
// caller's thread.
using ProgressFn = std::function<void(std::string_view stage, double fraction)>;

}  // namespace smallem

#endif  // SMALLEM_CORPUS_PROGRESS_H_
