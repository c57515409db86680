#!/usr/bin/env bash
# Starts a 2-thread training child (`smallem-worker child`, GPT-2, 1 layer,
# embed 32, context 32, batch 4) N times, stops each with SIGTERM after a
# random 0.05–1 s, and counts the starts that did not end as a SIGTERM'd
# child should (exit 143). Before the signal mask around oneDNN's sgemm,
# about 1 start in 130 crashed with heap corruption (docs/reliability.md §
# Found and fixed: signals inside oneDNN's sgemm corrupted the heap).
#   bench/child_starts.sh BUILD_DIR DATA_DIR [N=400]
set -euo pipefail
build=$(cd "$1" && pwd); data=$(cd "$2" && pwd); n=${3:-400}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/spec.json" <<JSON
{"batch": 4, "beta1": 0.9, "beta2": 0.95, "bias": true, "context": 32, "data": "$data",
 "embed": 32, "eval_batch_size": 4, "eval_batches": 4, "feed_forward": "gelu", "grad_clip": 1.0,
 "heads": 2, "layers": 1, "lr": 0.001, "min_lr_ratio": 0.1, "norm": "layer",
 "optimizer": "adamw", "positions": "learned", "seed": 1, "steps": 200000, "warmup": 0.05,
 "weight_decay": 0.1}
JSON
bad=0
for i in $(seq 1 "$n"); do
  rm -rf "$dir/out" "$dir/ck"
  "$build/worker/smallem-worker" child --spec "$dir/spec.json" --out "$dir/out" --threads 2 \
    --progress-every 100 --device cpu --checkpoint "$dir/ck" > "$dir/log" 2> "$dir/err" &
  pid=$!
  sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.05 + 0.95 * rand() }')"
  kill -TERM "$pid"
  rc=0; wait "$pid" || rc=$?
  if (( rc != 143 )); then
    bad=$((bad + 1))
    echo "start $i: exit $rc: $(tail -1 "$dir/err")"
  fi
done
echo "{\"starts\":$n,\"bad\":$bad}"
