#!/usr/bin/env bash
# test-summary.sh LOG: what failed in a `go test` output (plain or -v), for
# the end of a run: the lines each failing test logged (at most 30 per
# test, 8 tests), then the failing tests and packages, last, so that a tail of
# the output names them.
set -euo pipefail
log=$1
echo
echo "================ make test failed ================"
# Failure messages: with -v each test's t.Log/t.Error lines are indented
# under its name; take the 30 lines above each "--- FAIL" line.
last=0
grep -n -- '--- FAIL' "$log" | head -n 8 | while IFS=: read -r line _; do
  [ "$line" -le "$last" ] && continue
  from=$((line > 30 ? line - 30 : 1))
  [ "$from" -le "$last" ] && from=$((last + 1))
  last=$line
  echo "---- output above line $line:"
  sed -n "${from},${line}p" "$log" | grep -v -e '^=== \(RUN\|PAUSE\|CONT\)' -e '--- PASS' -e '^ok ' | cut -c1-400
done
# Without -v a failing test's t.Error/t.Fatal lines come right after its
# "--- FAIL" line, indented, before any process output it dumps: print the
# "file.go:N: message" lines of the 200 lines below each.
grep -n -- '--- FAIL' "$log" | head -n 8 | while IFS=: read -r line _; do
  msgs=$(sed -n "$((line + 1)),$((line + 200))p" "$log" | grep -E '^ +[A-Za-z0-9_]+\.go:[0-9]+: ' | grep -v -e 'output (last [0-9]* lines)' | head -n 12 | cut -c1-400 || true)
  [ -n "$msgs" ] || continue
  echo "---- messages below line $line:"
  printf '%s\n' "$msgs"
done
if grep -q -e '^panic:' -e 'test timed out' "$log"; then
  echo "---- panics:"
  grep -A 12 -e '^panic:' "$log" | head -n 40 | cut -c1-400
fi
echo "---- failed tests:"
grep -- '--- FAIL' "$log" | sed 's/^ *//' | head -n 40 || echo "(none reported: a build failure or a crash; see FAIL lines)"
echo "---- failed packages:"
grep -E '^(FAIL|---? FAIL|# )' "$log" | grep -v -- '--- FAIL' | head -n 40 || true
