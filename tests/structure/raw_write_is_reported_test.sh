#!/usr/bin/env bash
# check_durable_writes.sh must fail on a file written or renamed outside
# base/files (an ofstream, std::filesystem::rename, rename(), fopen "w",
# copy_file) and pass on reads and on base/files itself.
set -uo pipefail
checker="$(cd "$(dirname "$0")" && pwd)/check_durable_writes.sh"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{base,engine/train,worker,server/report}

printf 'int fd = open(p, O_WRONLY);\nrename(a, b);\n' >"$tree/base/files.cc"
printf 'std::ifstream in(path);\nstd::FILE* f = std::fopen(p, "rb");\n// fs::rename(a, b) in a comment\n' \
  >"$tree/engine/train/ok.cc"
if ! "$checker" "$tree" >/dev/null; then
  echo "FAIL: reads were refused:"; "$checker" "$tree"; exit 1
fi

printf 'std::ofstream out(path);\n' >"$tree/worker/bad.cc"
printf '  std::filesystem::rename(a, b);\n' >"$tree/engine/train/bad.cc"
printf 'x;\nif (rename(a.c_str(), b.c_str()) != 0) {}\n' >"$tree/server/report/bad.cc"
printf 'FILE* f = fopen(p, "w");\nfs::copy_file(a, b);\n' >"$tree/worker/bad2.cc"
out="$("$checker" "$tree")" && { echo "FAIL: direct writes passed"; exit 1; }
for expected in 'worker/bad.cc:1:' 'engine/train/bad.cc:1:' 'server/report/bad.cc:2:' \
                'worker/bad2.cc:1:' 'worker/bad2.cc:2:'; do
  grep -qF "$expected" <<<"$out" || { echo "FAIL: not reported: $expected"; echo "$out"; exit 1; }
done
echo "ok: 5 direct writes reported, reads and base/files accepted"
