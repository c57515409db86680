#!/usr/bin/env bash
# The demo's baseline trained with ten seeds, for real, then every split of
# them into two arms of three through the comparator (docs/equal-time.md
# § On real runs). Needs build/ (smallemctl, smallem_null_splits_bench) and
# data/demo (scripts/demo prepares it).
#   bench/null_splits.sh [SEEDS] [OUT]      default 10 seeds into runs/null-splits
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-10}
out=${2:-runs/null-splits}
results=()
for s in $(seq 1 "$seeds"); do
  dir="$out/seed$s"
  if [[ ! -f "$dir/result.json" ]]; then
    # examples/demo.yaml's base and budget.
    build/cli/smallemctl train --data data/demo --arch gpt2 --layers 2 --heads 2 --embed 96 \
      --context 64 --batch 8 --optimizer adamw --lr 0.003 --eval-batches 50 --steps 1000 \
      --seed "$s" --threads 2 --out "$dir" 2>/dev/null
  fi
  results+=("$dir/result.json")
done
build/bench/smallem_null_splits_bench --arm-seeds 3 "${results[@]}"
