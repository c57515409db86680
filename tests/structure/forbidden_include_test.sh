#!/usr/bin/env bash
# check_includes.sh must fail on a wrong-way include: a worker source that
# includes a server header, a server source that includes a tensor header,
# the engine reaching for gRPC plumbing, and a smallemctl verb other than
# `run` embedding the coordinator — and pass on the allowed ones.
set -uo pipefail
checker="$(cd "$(dirname "$0")" && pwd)/check_includes.sh"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{worker,server/store,engine/train,corpus,cli}

printf '#include "worker/daemon.h"\n#include "rpc/auth.h"\n#include "engine/tensor.h"\n' >"$tree/worker/ok.cc"
printf '#include "corpus/dataset_format.h"\n#include "runspec/run_spec.h"\n' >"$tree/server/store/ok.cc"
printf '#include "server/service/coordinator.h"\n#include "runspec/grid.h"\n' >"$tree/cli/run_command.cc"
if ! "$checker" "$tree" >/dev/null; then
  echo "FAIL: allowed includes were refused:"; "$checker" "$tree"; exit 1
fi

printf '#include "server/store/sqlite_store.h"\n' >"$tree/worker/bad.cc"
printf '#include "engine/tensor.h"\n' >"$tree/server/store/bad.cc"
printf '#include "rpc/limits.h"\n' >"$tree/engine/train/bad.cc"
printf '#include "engine/tensor.h"\n' >"$tree/corpus/bad.cc"
printf '#include "server/service/coordinator.h"\n' >"$tree/cli/submit_command.cc"
out="$("$checker" "$tree")" && { echo "FAIL: forbidden includes passed"; exit 1; }
for expected in 'worker/bad.cc:1: includes "server/store/sqlite_store.h"' \
                'server/store/bad.cc:1: includes "engine/tensor.h"' \
                'engine/train/bad.cc:1: includes "rpc/limits.h"' \
                'corpus/bad.cc:1: includes "engine/tensor.h"' \
                'cli/submit_command.cc:1: includes "server/service/coordinator.h"'; do
  grep -qF "$expected" <<<"$out" || { echo "FAIL: not reported: $expected"; echo "$out"; exit 1; }
done
echo "ok: 5 forbidden includes reported, allowed ones accepted"
