#!/usr/bin/env bash
# contrib/systemd's units pass `systemd-analyze verify` without a word (it
# only warns, exit 0, about unknown keys and bad values: any output fails
# here), with ExecStart pointing at the binaries of BUILD_DIR; and a broken
# copy is caught, so the check can fail. Exits 77 (skipped) where
# systemd-analyze is missing.
#   systemd_units_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=${1:?usage: systemd_units_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: systemd_units_test.sh SOURCE_DIR BUILD_DIR}
command -v systemd-analyze >/dev/null || { echo "SKIPPED: systemd-analyze is missing"; exit 77; }

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
for unit in smallem-coordinator.service smallem-worker@.service; do
  sed -e "s#/usr/local/bin/smallem-coordinator#$build/server/smallem-coordinator#" \
      -e "s#/usr/local/bin/smallem-worker#$build/worker/smallem-worker#" \
      "$src/contrib/systemd/$unit" >"$t/$unit"
done
# A template is verified through an instance of it.
cp "$t/smallem-worker@.service" "$t/smallem-worker@all.service"

verify() {  # prints what systemd-analyze says; fails when it says anything
  local out
  out=$(cd "$t" && systemd-analyze verify --man=no "$@" 2>&1)
  local rc=$?
  [[ $rc -eq 0 && -z $out ]] || { echo "$out"; return 1; }
}
verify ./smallem-coordinator.service ./smallem-worker@all.service || {
  echo "FAILED: contrib/systemd units do not verify cleanly"; exit 1; }
for key in Restart=on-failure NoNewPrivileges=yes ProtectSystem=strict LoadCredential=; do
  for unit in smallem-coordinator.service smallem-worker@.service; do
    grep -q "^$key" "$t/$unit" || { echo "FAILED: $unit has no $key"; exit 1; }
  done
done
grep -q '^StateDirectory=' "$t/smallem-coordinator.service" || {
  echo "FAILED: the coordinator keeps its database outside a StateDirectory"; exit 1; }
grep -q '^KillMode=mixed' "$t/smallem-worker@.service" || {
  echo "FAILED: systemd would SIGTERM the worker's children too"; exit 1; }

# The check catches a mistake.
sed -i 's/^ProtectSystem=strict/ProtectSystem=strcit/' "$t/smallem-coordinator.service"
if verify ./smallem-coordinator.service >/dev/null; then
  echo "FAILED: a misspelt ProtectSystem value went unnoticed"; exit 1
fi
echo "PASSED: both units verify cleanly; a broken one is caught"
