#!/usr/bin/env bash
# Training tokens/s of smallem's CPU engine against PyTorch on the tiny config
# (4 layers, embed 128, 4 heads, context 128, batch 16) at vocab 256 and 2048,
# same thread count, measured in the same run. Prints JSON lines and a table.
#   bench/compare_torch.sh [BUILD_DIR] [THREADS]
set -euo pipefail
build=${1:-build}
threads=${2:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
printf '%-7s %-8s %14s %14s %7s\n' vocab threads smallem_tok/s torch_tok/s ratio
for vocab in 256 2048; do
  ours=$("$build/bench/smallem_train_bench" --vocab "$vocab" --threads "$threads")
  peer=$(/usr/bin/python3 "$here/torch_peer.py" --vocab "$vocab" --threads "$threads")
  echo "$ours" >&2
  echo "$peer" >&2
  a=$(echo "$ours" | sed -E 's/.*"tokens_per_s":([0-9.]+).*/\1/')
  b=$(echo "$peer" | sed -E 's/.*"tokens_per_s": ([0-9.]+).*/\1/')
  printf '%-7s %-8s %14.0f %14.0f %7.2f\n' "$vocab" "$threads" "$a" "$b" "$(echo "$a / $b" | bc -l)"
done
