#!/usr/bin/env bash
# The one-way structure, checked on the sources: each directory may include
# only the project directories listed for it (docs/architecture.md).
#   check_includes.sh [ROOT]   exit 0 when every include is allowed; else
#                              prints file:line: the include and the rule.
# Third-party headers (absl/, grpcpp/, nlohmann/, ...) are the linker's
# business: CMake links each library only with what it may use.
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root" || exit 2

# dir (most specific first) | project prefixes its files may include
rules=(
  "base|base/"
  "spec|spec/ base/"
  "rpc|rpc/ base/ smallem/v1/"
  "engine/data|engine/data/ base/"
  "engine|engine/ spec/ base/"
  "kernels|kernels/ engine/ spec/ base/ emulator/launch.h"
  "emulator|emulator/"
  "server/http|server/http/ server/queue/ server/store/ server/report/ server/analysis/ rpc/ base/"
  "server|server/ rpc/ spec/ engine/data/ base/ smallem/v1/"
  "worker|worker/ rpc/ engine/ spec/ base/ kernels/cuda_backend.h smallem/v1/"
  "cli|cli/ server/ rpc/ engine/ spec/ base/ kernels/cuda_backend.h smallem/v1/"
  "fuzz|fuzz/ server/grid/ engine/io/ engine/data/ spec/ base/"
)
# Everything a project include can start with.
project='^(base|spec|rpc|engine|kernels|emulator|server|worker|cli|fuzz|smallem/v1|tests|bench)/'

bad=0
while IFS= read -r file; do
  allowed=""
  for rule in "${rules[@]}"; do
    dir="${rule%%|*}"
    if [[ "$file" == "$dir/"* ]]; then allowed="${rule#*|}"; break; fi
  done
  [[ -n "$allowed" ]] || continue
  while IFS=: read -r line text; do
    inc="$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$text")"
    [[ -n "$inc" && "$inc" =~ $project ]] || continue
    ok=0
    for prefix in $allowed; do
      if [[ "$inc" == "$prefix"* ]]; then ok=1; break; fi
    done
    if (( !ok )); then
      echo "$file:$line: includes \"$inc\"; ${file%%/*}/ may include only: $allowed"
      bad=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file")
done < <(find base spec rpc engine kernels emulator server worker cli fuzz -type f \
           \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
exit "$bad"
