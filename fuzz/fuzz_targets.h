// The fuzz targets: one entry function per parser of outside input, each
// taking arbitrary bytes and returning 0 (libFuzzer's convention). An entry
// must never crash, hang or leak whatever the bytes; where a parser accepts
// its input, the entry also checks what the parser promises of it (a
// CHECK failure is a finding). docs/fuzzing.md says how they run.
//
// Built into libFuzzer binaries (fuzz/libfuzzer_main.cc, -DSMALLEM_FUZZ=ON
// with clang) and into the test suite's replay of fuzz/corpus/<name>/
// (tests/fuzz/corpus_replay_test.cc, any compiler). Thread-safe: no shared
// state beyond a dataset directory made once per process (DatasetMeta).
#ifndef SMALLEM_FUZZ_FUZZ_TARGETS_H_
#define SMALLEM_FUZZ_FUZZ_TARGETS_H_

#include <cstddef>
#include <cstdint>

namespace smallem::fuzz {

// A grid file's YAML (runspec: ParseGrid, then every cell's spec).
int FuzzGrid(const uint8_t* data, size_t size);
// A weights file's bytes (engine/io: ParseSafetensors).
int FuzzSafetensors(const uint8_t* data, size_t size);
// A tokenizer.json's text (corpus: Tokenizer::FromJson, then encoding
// and decoding with the tokenizer it accepts).
int FuzzTokenizer(const uint8_t* data, size_t size);
// A dataset's meta.json beside valid data files (corpus: Dataset::Open
// and VerifyDatasetHashes).
int FuzzDatasetMeta(const uint8_t* data, size_t size);
// A run spec's JSON (runspec/: RunSpec::FromJson, Validate, ModelFor).
int FuzzRunSpec(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // its corpus: fuzz/corpus/<name>/
  int (*entry)(const uint8_t* data, size_t size);
};

inline constexpr Target kTargets[] = {
    {"grid", FuzzGrid},
    {"safetensors", FuzzSafetensors},
    {"tokenizer", FuzzTokenizer},
    {"dataset_meta", FuzzDatasetMeta},
    {"run_spec", FuzzRunSpec},
};

}  // namespace smallem::fuzz

#endif  // SMALLEM_FUZZ_FUZZ_TARGETS_H_
