#!/bin/sh
# expect_race.sh BINARY FILTER FILE: runs the racecheck binary BINARY on the
# cases FILTER and succeeds only when ThreadSanitizer reports a data race
# whose two accesses are both in FILE (a planted race, tests/emulator/
# planted_bugs.cmake). Prints the report's first lines either way.
binary=$1 filter=$2 file=$3
out=$(TSAN_OPTIONS=halt_on_error=1 "$binary" "--gtest_filter=$filter" 2>&1)
report=$(printf '%s\n' "$out" | sed -n '/WARNING: ThreadSanitizer: data race/,/SUMMARY/p')
printf '%s\n' "$report" | head -40
if [ -z "$report" ]; then
  printf '%s\n' "$out" | tail -20
  echo "expect_race.sh: no data race reported" >&2
  exit 1
fi
# The report's two access stacks: "Write of size 4 at … by thread T3:" and
# "Previous read …", each followed by its frames; the first frame of each
# must be in FILE.
accesses=$(printf '%s\n' "$report" | grep -A1 -E '^ *(Previous )?(read|write|Read|Write|atomic)' |
           grep -c "$file:")
if [ "$accesses" -lt 2 ]; then
  echo "expect_race.sh: a race was reported, but not with both accesses in $file" >&2
  exit 1
fi
