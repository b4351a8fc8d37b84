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
# A failing test's own t.Error/t.Fatal lines ("file.go:N: message"): with
# -v they stream above its "--- FAIL" line, among whatever it logged (a
# process's output can be hundreds of lines); without -v they follow it.
# Print the last 12 of the test's lines from its "=== RUN" to its next test,
# at most 200 lines below.
grep -n -- '--- FAIL' "$log" | head -n 8 | while IFS=: read -r line rest; do
  name=$(printf '%s' "$rest" | sed -E 's/^ *--- FAIL: ([^ ]+).*/\1/')
  from=$({ grep -n -F -x -- "=== RUN   $name" "$log" || true; } | awk -F: -v l="$line" '$1 < l { n = $1 } END { print n + 0 }')
  [ "$from" -gt 0 ] || from=$((line + 1))
  msgs=$(awk -v a="$from" -v l="$line" 'NR >= a && NR > l + 200 { exit } NR >= a && NR > l && /^(=== |--- |FAIL|ok )/ { exit } NR >= a' "$log" | grep -E '^ +[A-Za-z0-9_]+\.go:[0-9]+: ' | grep -v -e 'output (last [0-9]* lines)' | tail -n 12 | cut -c1-400 || true)
  [ -n "$msgs" ] || continue
  echo "---- messages of $name:"
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
