#!/usr/bin/env bash
# Compare the ratio lines of a benchmark run with test/bench/baseline.
#
#   scripts/bench-check.sh [--all] OUTPUT [BASELINE]
#
# OUTPUT holds lines "ironlink ratio: <name> <ours/raw>" (scripts/bench.sh);
# BASELINE (default test/bench/baseline) lines "<name> <ratio>", # comments.
# A name printed more than once (a benchmark run several times) counts with
# its best ratio.
# A figure fails when its ratio is below its baseline × BENCH_MIN_FRACTION
# (default 0.7: more than 30 % below its baseline, issue 26 item 5; see
# docs/design/performance.md for the run-to-run spread). With
# --all (make bench-short), a baseline name missing from OUTPUT fails too;
# a name without a baseline is reported and passes.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [ "${1:-}" = --all ]; then all=1; shift; fi
out=${1:?usage: $0 [--all] OUTPUT [BASELINE]}
base=${2:-test/bench/baseline}
min=${BENCH_MIN_FRACTION:-0.7}

awk -v min="$min" -v all="$all" '
  FNR == NR {
    sub(/#.*/, "")
    if (NF >= 2) { want[$1] = $2; order[++n] = $1 }
    next
  }
  /^ironlink ratio: / {
    if (!($3 in got)) seen[++m] = $3
    if (!($3 in got) || $4 + 0 > got[$3] + 0) got[$3] = $4
  }
  END {
    bad = 0
    for (i = 1; i <= m; i++) {
      k = seen[i]
      if (!(k in want)) { printf "%-24s %s (no baseline)\n", k, got[k]; continue }
      floor = want[k] * min
      ok = got[k] + 0 >= floor
      printf "%-24s %s baseline %s floor %.3f %s\n", k, got[k], want[k], floor, ok ? "ok" : "FAIL"
      if (!ok) bad++
    }
    for (i = 1; i <= n; i++) {
      k = order[i]
      if (!(k in got) && all) { printf "%-24s missing from the run: FAIL\n", k; bad++ }
    }
    if (m == 0) { print "no ratio line in the output: FAIL"; bad++ }
    if (bad) { printf "%d figure(s) below baseline x %s or missing\n", bad, min; exit 1 }
  }' "$base" "$out"
