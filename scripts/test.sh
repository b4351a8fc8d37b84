#!/usr/bin/env bash
# make test: unit tests, storage tests against real PostgreSQL (one database
# per test) and end-to-end tests with real ironlink-hub/ironlink-satellite
# processes against the built-in OpenStack simulator and, when
# IRONLINK_E2E_CLOUDS_YAML/IRONLINK_E2E_CLOUD name one, a real cloud.
#
# PostgreSQL: IRONLINK_TEST_DATABASE_URL, else DATABASE_URL, else the local
# server on 127.0.0.1:5432; when none answers, a private throwaway cluster is
# started for the run (and removed after).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh

url=${IRONLINK_TEST_DATABASE_URL:-${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}}
if ! pg_answers "$url"; then
  if [ -n "${IRONLINK_TEST_DATABASE_URL:-}${DATABASE_URL:-}" ]; then
    echo "PostgreSQL at the configured URL does not answer" >&2
    exit 1
  fi
  echo ">> no PostgreSQL on 127.0.0.1:5432; starting a private throwaway cluster for the tests" >&2
  trap stop_private_pg EXIT
  start_private_pg "${TMPDIR:-/tmp}/ironlink-test-pg.$$" "${IRONLINK_TEST_PG_PORT:-55433}"
  url=$PRIVATE_PG_URL
fi
export IRONLINK_TEST_DATABASE_URL=$url

if [ -z "${IRONLINK_E2E_CLOUDS_YAML:-}" ] || [ -z "${IRONLINK_E2E_CLOUD:-}" ]; then
  echo ">> no real cloud named: the real-cloud tests will be skipped (set IRONLINK_E2E_CLOUDS_YAML and IRONLINK_E2E_CLOUD; docs/howto/test-against-openstack.md)" >&2
fi
# The output is kept so that a failure is summarised at the end: CI shows
# only the tail of a run, and with -v the failing test can be thousands of
# lines above it.
log=$(mktemp "${TMPDIR:-/tmp}/ironlink-test.XXXXXX.log")
status=0
go test -count=1 -timeout 30m "$@" ./... 2>&1 | tee "$log" || status=$?
# Benchmarks hold correctness checks of their own (a sweep of a consistent
# site judges no candidate, ...) that a plain test run never reaches: the
# cheap ones run once here, at their small size ("package pattern" a line).
benchmarks_once='./satellite/agent ^BenchmarkSweepCost$/^nodes=20$
./satellite/agent ^BenchmarkResyncCost$/^nodes=20$'
while read -r pkg pattern; do
  [ -n "$pkg" ] || continue
  go test -count=1 -timeout 10m "$@" -run '^$' -benchtime=1x -bench "$pattern" "$pkg" 2>&1 | tee -a "$log" || status=$?
done <<<"$benchmarks_once"
if [ "$status" -ne 0 ]; then
  scripts/test-summary.sh "$log" >&2
fi
rm -f "$log"
exit "$status"
