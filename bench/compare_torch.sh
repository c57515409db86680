#!/usr/bin/env bash
# Training tokens/s of smallem's CPU engine against PyTorch on the tiny config
# (4 layers, embed 128, 4 heads, context 128, batch 16), GPT-2 and modern
# architectures, vocab 256 and 8192 (the reference model's), each side at 1
# thread and at every core, measured in the same run, interleaved so that
# both sides see the same load. The ratios are against PyTorch's BEST
# configuration (its faster thread count), never its worst.
#   bench/compare_torch.sh [BUILD_DIR] [REPEATS]
# Environment: STEPS (timed steps, 20), WARMUP (3), ARCHS ("gpt2 modern"),
# VOCABS ("256 8192"). JSON lines of every run go to stderr. Both sides
# inherit the rest of the environment: on a shared, loaded machine run it
# with OMP_WAIT_POLICY=passive (docs/benchmarks.md § Threads), which helps
# both sides' OpenMP teams alike. PyTorch runs on tcmalloc where it is
# installed (SMALLEM_BENCH_PEERS=1 scripts/setup): it frees and allocates
# its large tensors every step, and glibc gives blocks of 32 MiB and more
# back to the kernel, so each step faults the vocab-8192 logits in again;
# tcmalloc keeps them (docs/benchmarks.md § CPU training throughput).
set -euo pipefail
build=${1:-build}
repeats=${2:-1}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
all=$(nproc)
here=$(cd "$(dirname "$0")" && pwd)
tcmalloc=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -n 1 || true)
tps() { sed -E 's/.*"tokens_per_s": ?([0-9.]+).*/\1/'; }
ratio() { echo "$1 / $2" | bc -l; }
max() { echo "if ($1 > $2) $1 else $2" | bc -l; }

echo "# $(date -u +%F) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default}, $steps steps after $warmup," \
  "PyTorch's allocator: $([[ -n $tcmalloc ]] && echo tcmalloc || echo glibc)"
printf '%-3s %-6s %-5s | %9s %9s | %9s %9s | %13s %13s\n' rep arch vocab \
  "ours 1t" "ours ${all}t" "torch 1t" "torch ${all}t" "1t/torch best" "${all}t/torch best"
for rep in $(seq 1 "$repeats"); do
  for arch in ${ARCHS:-gpt2 modern}; do
    for vocab in ${VOCABS:-256 8192}; do
      declare -A ours=() torch=()
      for threads in 1 "$all"; do
        line=$("$build/bench/smallem_train_bench" --arch "$arch" --vocab "$vocab" \
               --threads "$threads" --steps "$steps" --warmup "$warmup")
        echo "$line" >&2
        ours[$threads]=$(tps <<<"$line")
        # The peer gets the OpenBLAS kernels smallem runs (Debian's OpenBLAS
        # falls back to SSE3 ones on CPUs newer than it knows; smallem asks
        # for better ones itself, engine/cpu/blas_core.cc): same sgemm.
        core=$(sed -E 's/.*"blas_core":"([^"]*)".*/\1/' <<<"$line")
        line=$(OPENBLAS_CORETYPE=$core LD_PRELOAD=$tcmalloc /usr/bin/python3 "$here/torch_peer.py" --arch "$arch" --vocab "$vocab" \
               --threads "$threads" --steps "$steps" --warmup "$warmup")
        echo "$line" >&2
        torch[$threads]=$(tps <<<"$line")
      done
      best=$(max "${torch[1]}" "${torch[$all]}")
      printf '%-3s %-6s %-5s | %9.0f %9.0f | %9.0f %9.0f | %12.2fx %12.2fx\n' \
        "$rep" "$arch" "$vocab" "${ours[1]}" "${ours[$all]}" "${torch[1]}" "${torch[$all]}" \
        "$(ratio "${ours[1]}" "$best")" "$(ratio "${ours[$all]}" "$best")"
    done
  done
done
