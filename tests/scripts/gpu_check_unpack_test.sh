#!/usr/bin/env bash
# scripts/gpu-check's unpacking of .debs on a machine without dpkg: real
# .deb archives built here with dpkg-deb, their data member compressed with
# xz, zstd, gzip and none, unpacked through `gpu-check --unpack` with dpkg
# hidden (GPU_CHECK_NO_DPKG=1), must all give back the packaged files. A
# .deb with an unknown member and a file that is no .deb must fail, saying
# which. Usage: gpu_check_unpack_test.sh REPO_ROOT
set -uo pipefail
root="${1:?usage: gpu_check_unpack_test.sh REPO_ROOT}"
script="$root/scripts/gpu-check"
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb is not installed (Debian's dpkg)"; exit 77; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

# One package: a library-like file and a CMake config, as the carried .debs hold.
pkg="$work/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/usr/lib/x86_64-linux-gnu/cmake/demo" "$pkg/usr/src/demo"
printf 'Package: smallem-demo\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.com>\nDescription: test\n' \
  >"$pkg/DEBIAN/control"
echo 'set(DEMO_FOUND 1)' >"$pkg/usr/lib/x86_64-linux-gnu/cmake/demo/demoConfig.cmake"
head -c 200000 /dev/urandom | base64 >"$pkg/usr/src/demo/payload.txt"

checked=0
for compression in xz zstd gzip none; do
  case "$compression" in
    xz) member=data.tar.xz; tool=xz ;;
    zstd) member=data.tar.zst; tool=zstd ;;
    gzip) member=data.tar.gz; tool=gzip ;;
    none) member=data.tar; tool=cat ;;
  esac
  command -v "$tool" >/dev/null || { echo "skipping $compression: $tool is not installed"; continue; }
  deb="$work/demo-$compression.deb"
  if ! dpkg-deb --root-owner-group -Z"$compression" --build "$pkg" "$deb" >/dev/null 2>"$work/err"; then
    # An older dpkg-deb without zstd: nothing to test for it here.
    echo "skipping $compression: dpkg-deb cannot build it: $(cat "$work/err")"; continue
  fi
  ar t "$deb" | grep -qx "$member" || fail "$compression: dpkg-deb wrote $(ar t "$deb" | tr '\n' ' '), not $member"
  out="$work/out-$compression"
  GPU_CHECK_NO_DPKG=1 bash "$script" --unpack "$out" "$deb" >"$work/log" 2>&1 ||
    fail "$compression: gpu-check --unpack failed: $(cat "$work/log")"
  cmp -s "$pkg/usr/src/demo/payload.txt" "$out/usr/src/demo/payload.txt" ||
    fail "$compression: payload.txt differs after unpacking $member"
  [[ -f "$out/usr/lib/x86_64-linux-gnu/cmake/demo/demoConfig.cmake" ]] ||
    fail "$compression: demoConfig.cmake missing after unpacking $member"
  echo "ok: $member"
  checked=$((checked + 1))
done
(( checked >= 3 )) || fail "only $checked compressions could be checked (xz, gzip and none need no extra tool)"

# With dpkg (when present) the same .deb unpacks the same way.
if command -v dpkg >/dev/null; then
  bash "$script" --unpack "$work/with-dpkg" "$work/demo-xz.deb" >/dev/null 2>&1 ||
    fail "gpu-check --unpack with dpkg failed"
  cmp -s "$pkg/usr/src/demo/payload.txt" "$work/with-dpkg/usr/src/demo/payload.txt" ||
    fail "dpkg -x gave another payload"
fi

# Not a .deb, and a .deb whose data member is of an unknown kind: errors that say so.
echo "not an archive" >"$work/bogus.deb"
if GPU_CHECK_NO_DPKG=1 bash "$script" --unpack "$work/bogus" "$work/bogus.deb" >"$work/log" 2>&1; then
  fail "a file that is no .deb unpacked"
fi
(cd "$work" && cp demo-gzip.deb odd.deb && ar t odd.deb >/dev/null &&
  echo x >data.tar.lz && ar d odd.deb data.tar.gz && ar r odd.deb data.tar.lz 2>/dev/null)
if GPU_CHECK_NO_DPKG=1 bash "$script" --unpack "$work/odd" "$work/odd.deb" >"$work/log" 2>&1; then
  fail "a .deb with data.tar.lz unpacked"
fi
grep -q "unknown member data.tar.lz" "$work/log" || fail "unknown member not named: $(cat "$work/log")"
echo "ok: $checked compressions unpacked without dpkg; bad archives refused"
