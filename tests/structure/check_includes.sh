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

# dir or file glob (most specific first) | project prefixes its files may
# include. smallemctl reaches into the coordinator in three places only: `run`
# embeds one, `--db` opens its database read-only, `report --plot` draws the
# report's figure; every other verb is a client of the gRPC API.
rules=(
  "base|base/"
  "runspec|runspec/ base/"
  "corpus|corpus/ base/"
  "rpc|rpc/ base/ smallem/v1/"
  "engine|engine/ runspec/ corpus/ base/"
  "kernels|kernels/ engine/ runspec/ base/ emulator/launch.h"
  "emulator|emulator/"
  "server/http|server/http/ server/queue/ server/store/ server/report/ server/analysis/ rpc/ base/"
  "server|server/ rpc/ runspec/ corpus/ base/ smallem/v1/"
  "worker|worker/ rpc/ engine/ runspec/ corpus/ base/ kernels/cuda_backend.h smallem/v1/"
  "cli/run_command.cc|cli/ server/service/coordinator.h rpc/ engine/ runspec/ corpus/ base/ smallem/v1/"
  "cli/session.*|cli/ server/service/read_only_coordinator.h server/store/ rpc/ runspec/ base/ smallem/v1/"
  "cli/service_commands.cc|cli/ server/report/plot.h rpc/ runspec/ base/ smallem/v1/"
  "cli|cli/ rpc/ engine/ runspec/ corpus/ base/ kernels/cuda_backend.h smallem/v1/"
  "fuzz|fuzz/ runspec/ corpus/ engine/io/ base/"
)
# Everything a project include can start with.
project='^(base|runspec|corpus|rpc|engine|kernels|emulator|server|worker|cli|fuzz|smallem/v1|tests|bench)/'

bad=0
while IFS= read -r file; do
  allowed=""
  for rule in "${rules[@]}"; do
    dir="${rule%%|*}"
    # shellcheck disable=SC2053  # $dir is a glob on purpose
    if [[ "$file" == $dir || "$file" == "$dir/"* ]]; then allowed="${rule#*|}"; break; fi
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
      echo "$file:$line: includes \"$inc\"; $dir may include only: $allowed"
      bad=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file")
done < <(find base runspec corpus rpc engine kernels emulator server worker cli fuzz -type f \
           \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
exit "$bad"
