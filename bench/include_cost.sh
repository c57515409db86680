#!/usr/bin/env bash
# What one header costs a file that includes it (docs/benchmarks.md § The
# first command): a file holding only `#include "HEADER"`, compiled three
# times with cli/main.cc's command from build/compile_commands.json, no
# compiler cache; prints the seconds of each compile.
#   bench/include_cost.sh [HEADER ...]     default: the service's heavy headers
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || set -- CLI/CLI.hpp smallem/v1/client.grpc.pb.h nlohmann/json.hpp grpcpp/grpcpp.h \
  absl/status/statusor.h
command=$(python3 -c '
import json, re
entry = next(e for e in json.load(open("build/compile_commands.json")) if e["file"].endswith("cli/main.cc"))
command = re.sub(r" -o \S+| -c \S+| -MD| -MT \S+| -MF \S+", "", entry["command"])
print(command.replace("/usr/bin/ccache ", ""))')
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for header in "" "$@"; do
  printf '%s\nint main() {}\n' "${header:+#include \"$header\"}" >"$scratch/only.cc"
  times=()
  for _ in 1 2 3; do
    start=$(date +%s.%N)
    (cd build && CCACHE_DISABLE=1 eval "$command -c $scratch/only.cc -o $scratch/only.o")
    times+=("$(echo "$(date +%s.%N) - $start" | bc)")
  done
  printf '%-32s %s\n' "${header:-(empty file)}" "$(printf '%.2f s  ' "${times[@]}")"
done
