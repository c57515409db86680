#!/usr/bin/env bash
# The worker daemon carries no SQLite or YAML (it meets the coordinator only
# over the wire); the coordinator carries no OpenBLAS or OpenMP (it never
# computes on tensors). Checked on the binaries' dynamic dependencies.
#   linked_libraries_test.sh WORKER_BINARY COORDINATOR_BINARY
set -uo pipefail
worker="$1" coordinator="$2"
fail=0
check() {  # binary, regex of libraries it must not need, what it is
  local found
  found="$(ldd "$1" | awk -v pattern="$2" 'tolower($1) ~ pattern {print $1}' | tr '\n' ' ')"
  if [[ -n "$found" ]]; then echo "FAIL: $3 links $found"; fail=1; fi
}
# Proof that the check can see a library at all: both need gRPC. (ldd's
# output is read whole first: `ldd | grep -q` under pipefail fails whenever
# grep stops reading before ldd is done.)
for b in "$worker" "$coordinator"; do
  libraries="$(ldd "$b")" || { echo "FAIL: ldd $b"; exit 1; }
  [[ "$libraries" == *libgrpc++* ]] || { echo "FAIL: $b shows no libgrpc++"; exit 1; }
done
check "$worker" 'libsqlite3|libyaml-cpp' "the worker daemon ($worker)"
check "$coordinator" 'libopenblas|libdnnl|libgomp|libcublas' "the coordinator ($coordinator)"
# The emulated device (emulator/) is test-only; it is a static library, so
# look for its symbols rather than at ldd.
for b in "$worker" "$coordinator"; do
  if nm -C "$b" 2>/dev/null | grep -q ' smallem::emu::'; then
    echo "FAIL: $b contains the emulated device (emulator/)"; fail=1
  fi
done
(( fail )) || echo "ok: the worker links no SQLite/YAML, the coordinator no OpenBLAS/OpenMP/cuBLAS, neither the emulator"
exit "$fail"
