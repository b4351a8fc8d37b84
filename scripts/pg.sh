# shellcheck shell=bash
# Sourced by demo.sh and test.sh: start_private_pg DIR PORT starts a private,
# throwaway PostgreSQL cluster from Debian's binaries (installing the
# `postgresql` package with apt-get when they are missing), listening on
# 127.0.0.1:PORT with trust auth, and sets PRIVATE_PG_URL. stop_private_pg
# stops it and deletes DIR.

pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

ensure_pg_binaries() {
  if [ -z "$(pg_bindir)" ]; then
    echo ">> PostgreSQL binaries not found; installing Debian's postgresql package" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
  fi
  PG_BIN=$(pg_bindir)
  [ -n "$PG_BIN" ] || { echo "PostgreSQL binaries still missing after install" >&2; return 1; }
}

# as_pg_user runs a command as the cluster owner: initdb refuses to run as root.
as_pg_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start_private_pg() {
  local dir=$1 port=$2
  ensure_pg_binaries || return 1
  PRIVATE_PG_DIR=$dir
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    chown postgres "$dir"
    chmod 700 "$dir"
  fi
  as_pg_user "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  as_pg_user "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >/dev/null ||
    { cat "$dir/postgres.log" >&2; return 1; }
  PRIVATE_PG_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

stop_private_pg() {
  [ -n "${PRIVATE_PG_DIR:-}" ] || return 0
  if [ -d "$PRIVATE_PG_DIR/data" ]; then
    as_pg_user "$PG_BIN/pg_ctl" -D "$PRIVATE_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PRIVATE_PG_DIR"
  PRIVATE_PG_DIR=""
}

# pg_answers URL: true when a PostgreSQL server answers at URL.
pg_answers() {
  local bin
  bin=$(pg_bindir)
  if [ -n "$bin" ]; then
    "$bin/psql" "$1" -Atqc 'select 1' >/dev/null 2>&1
  elif command -v psql >/dev/null; then
    psql "$1" -Atqc 'select 1' >/dev/null 2>&1
  else
    return 1
  fi
}
