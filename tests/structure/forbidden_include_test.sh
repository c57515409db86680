#!/usr/bin/env bash
# check_includes.sh must fail on a wrong-way include: a worker source that
# includes a server header, a server source that includes a tensor header,
# and the engine reaching for gRPC plumbing — and pass on the allowed ones.
set -uo pipefail
checker="$(cd "$(dirname "$0")" && pwd)/check_includes.sh"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{worker,server/store,engine/train,engine/data}

printf '#include "worker/daemon.h"\n#include "rpc/auth.h"\n#include "engine/tensor.h"\n' >"$tree/worker/ok.cc"
printf '#include "engine/data/dataset_format.h"\n#include "spec/run_spec.h"\n' >"$tree/server/store/ok.cc"
if ! "$checker" "$tree" >/dev/null; then
  echo "FAIL: allowed includes were refused:"; "$checker" "$tree"; exit 1
fi

printf '#include "server/store/sqlite_store.h"\n' >"$tree/worker/bad.cc"
printf '#include "engine/tensor.h"\n' >"$tree/server/store/bad.cc"
printf '#include "rpc/limits.h"\n' >"$tree/engine/train/bad.cc"
printf '#include "engine/tensor.h"\n' >"$tree/engine/data/bad.cc"
out="$("$checker" "$tree")" && { echo "FAIL: forbidden includes passed"; exit 1; }
for expected in 'worker/bad.cc:1: includes "server/store/sqlite_store.h"' \
                'server/store/bad.cc:1: includes "engine/tensor.h"' \
                'engine/train/bad.cc:1: includes "rpc/limits.h"' \
                'engine/data/bad.cc:1: includes "engine/tensor.h"'; do
  grep -qF "$expected" <<<"$out" || { echo "FAIL: not reported: $expected"; echo "$out"; exit 1; }
done
echo "ok: 4 forbidden includes reported, allowed ones accepted"
