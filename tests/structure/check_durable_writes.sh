#!/usr/bin/env bash
# Every file the project writes for keeps goes through base/files
# (WriteFileDurably, RenameDurably, WriteFileChunk): a temporary in the same
# directory, fsync, rename, fsync the directory. This fails on a raw
# ofstream, rename, copy_file or fopen-for-writing in a source file outside
# base/files.cc, naming file and line. Usage: check_durable_writes.sh ROOT
#
# ALLOWED lists the exceptions, each with its reason: writes that are not
# files for keeps (an appended log, a lock, a file descriptor handed to a
# child).
set -uo pipefail
root="${1:?usage: check_durable_writes.sh ROOT}"
cd "$root" || exit 2

# file:pattern pairs allowed, and why.
ALLOWED=(
  # A child's stdout/stderr redirected to a log file it appends to, and
  # /dev/null for its stdin.
  'base/subprocess.cc:O_WRONLY'
  'base/subprocess.cc:/dev/null'
  # A job directory's lock file: flock(2) on an empty file, never read back.
  'worker/job_dirs.cc:extra_flags'
  # A backup's copy: created empty and owner-only (O_EXCL, 0600) for SQLite
  # to write into; SQLite syncs it, and an unchecked copy is removed.
  'server/store/sqlite.cc:O_EXCL'
  # The database's owner lock: flock(2) on the database file itself, which
  # SQLite writes; this descriptor only holds the lock.
  'server/store/store_lock.cc:O_RDWR'
)

patterns='std::ofstream|std::fstream|[^i]ofstream|(fs|std::filesystem)::rename|(^|[^A-Za-z_.:>])rename\(|std::rename|copy_file|fopen\([^)]*"[wa]|O_WRONLY|O_RDWR'
status=0
count=0
while IFS= read -r hit; do
  file="${hit%%:*}"
  rest="${hit#*:}"
  line="${rest%%:*}"
  text="${rest#*:}"
  # Comments are not writes.
  [[ "$(sed 's/^[[:space:]]*//' <<<"$text")" == //* ]] && continue
  allowed=0
  for entry in "${ALLOWED[@]}"; do
    [[ "$file" == "${entry%%:*}" ]] && grep -qE -- "${entry#*:}" <<<"$text" && allowed=1
  done
  [[ $allowed == 1 ]] && continue
  echo "$file:$line: writes or renames a file directly; use base/files.h (WriteFileDurably, RenameDurably, WriteFileChunk): $(sed 's/^[[:space:]]*//' <<<"$text")"
  status=1
  count=$((count + 1))
done < <(grep -rnE --include='*.cc' --include='*.h' --include='*.cu' -- "$patterns" \
           base engine kernels worker server cli rpc runspec corpus bench 2>/dev/null |
         grep -v '^base/files\.cc:')
if [[ $status == 0 ]]; then
  echo "ok: every file write goes through base/files"
else
  echo "$count direct write(s) found"
fi
exit $status
