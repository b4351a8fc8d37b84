#!/usr/bin/env bash
# make demo: PostgreSQL, an ironlink hub and a satellite against the built-in
# OpenStack simulator (about 50 nodes in mixed states that keep changing),
# then ironlink CLI and grpcurl commands to try. Ctrl-C stops everything this script started.
#
# It prints in three parts, each as soon as what it names exists: first the
# fleet view and the read-only CLI commands (once a device reached the hub);
# then, after the demo's story (scripts/demo-scenario.sh: a GPU fault
# quarantined by the policy, a failed and retried quarantine, a burst in
# one rack that trips the per-rack guard and is named as the common cause,
# pending actions, an operation in progress), the commands
# that act; last the raw API through grpcurl, which is installed in the
# background when missing, so it never delays the first two.
# Every line the demo prints with two spaces in front is a command that
# works as printed (test/docs runs each one).
#
# Settings (environment): DATABASE_URL (use this PostgreSQL instead of a
# private throwaway cluster), IRONLINK_HUB_LISTEN (default localhost:7070),
# DEMO_NODES (50), DEMO_CHURN (15s), DEMO_POLL_INTERVAL (10s), DEMO_PG_PORT (55432),
# DEMO_SWEEP_INTERVAL (15s), DEMO_ORPHANS (1 of each kind), DEMO_USER_CONFIG (1: write the
# CLI context "demo" into a missing ~/.config/ironlink/config.yaml; 0: never), DEMO_METRICS_ADDR
# (127.0.0.1:9108, the satellite's /metrics and /readyz), DEMO_ADMIN_ADDR (127.0.0.1:9090,
# the hub's admin listener; replica i of several: 127.0.0.1:909i), DEMO_WEB_ADDR
# (127.0.0.1:7080, the fleet view's token proxy),
# DEMO_REPLICAS (1; with 2, two hub replicas on 127.0.0.1:7071/7072 run behind
# the small ironlink-lb TCP load balancer on $IRONLINK_HUB_LISTEN).
# Every setting, and what .demo/ holds: docs/reference/make.md; a guided
# first hour with the demo: docs/tutorial.md.
#
# The satellite may be stopped and started again while the demo runs
# (.demo/start-satellite.sh starts it with the demo's flags); the demo ends
# only when you stop it or the simulator or the hub (with DEMO_REPLICAS=2:
# the load balancer) exits. Pid files and the satellite's state file of an
# earlier run are cleared at start; a demo still running is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pg.sh

HUB=${IRONLINK_HUB_LISTEN:-localhost:7070}
STATE=$PWD/.demo
mkdir -p "$STATE"
for f in "$STATE"/*.pid; do
  [ -e "$f" ] || continue
  p=$(cat "$f" 2>/dev/null || true)
  if [ -n "$p" ] && [ "$p" != $$ ] && kill -0 "$p" 2>/dev/null && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'ironlink\|demo.sh'; then
    echo "an earlier demo is still running (pid $p in .demo/$(basename "$f")): stop it first (kill -TERM \$(cat .demo/demo.pid))" >&2
    exit 1
  fi
done
# What an earlier run left: its pids, and the satellite's applied
# generations, which mean nothing to this run's new database and simulator.
rm -f "$STATE"/*.pid "$STATE"/satellite-state.json "$STATE"/satellite-state.json.*
echo $$ >"$STATE/demo.pid"
pids=()
# grpcurl, for the raw API commands printed last: installed in the
# background while everything else starts (go install takes minutes on a
# fresh machine).
gobin=$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin
grpcurl_pid=""
if ! command -v grpcurl >/dev/null && [ ! -x "$gobin/grpcurl" ]; then
  echo ">> installing grpcurl v1.9.4 into $gobin in the background (log: .demo/grpcurl-install.log)"
  go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4 >"$STATE/grpcurl-install.log" 2>&1 </dev/null &
  grpcurl_pid=$!
  pids+=("$grpcurl_pid")
fi
cleanup() {
  trap - INT TERM EXIT
  trap '' PIPE INT # finish cleaning up even if the terminal or a pipe is gone
  exec 1>&2 2>/dev/null
  echo
  echo ">> stopping the demo"
  # A satellite restarted by hand (.demo/start-satellite.sh) is not a child.
  sat=$(cat "$STATE/satellite.pid" 2>/dev/null || true)
  [ -n "$sat" ] && kill "$sat" 2>/dev/null || true
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for _ in $(seq 150); do [ -n "$sat" ] && kill -0 "$sat" 2>/dev/null || break; sleep 0.1; done
  stop_private_pg
  rm -f "$STATE"/*.pid
  echo ">> everything the demo started is stopped"
  exit "${1:-0}"
}
trap 'cleanup 0' INT TERM
trap 'cleanup $?' EXIT

if [ -n "${DATABASE_URL:-}" ]; then
  db=$DATABASE_URL
  echo ">> using DATABASE_URL"
else
  echo ">> starting a private PostgreSQL cluster on 127.0.0.1:${DEMO_PG_PORT:-55432}"
  start_private_pg "${TMPDIR:-/tmp}/ironlink-demo-pg.$$" "${DEMO_PG_PORT:-55432}"
  db=$PRIVATE_PG_URL
fi

echo ">> starting the OpenStack simulator (${DEMO_NODES:-50} nodes)"
: >"$STATE/openstacksim.log"
# --provision-step: each provision state of an operation lasts this long, so a
# node rests in "clean wait" long enough to be seen and cancelled.
bin/ironlink-openstacksim --listen 127.0.0.1:0 --nodes "${DEMO_NODES:-50}" --churn "${DEMO_CHURN:-15s}" \
  --provision-step "${DEMO_PROVISION_STEP:-3s}" \
  --orphans-ironic "${DEMO_ORPHANS:-1}" --orphans-nova "${DEMO_ORPHANS:-1}" --control-socket "$STATE/openstacksim.sock" --hardware \
  --clouds-yaml "$STATE/clouds.yaml" --cloud sim >"$STATE/openstacksim.out" 2>"$STATE/openstacksim.log" &
pids+=($!)
core=($!) # the processes whose exit ends the demo
for _ in $(seq 100); do grep -q OPENSTACK_SIM_URL "$STATE/openstacksim.out" 2>/dev/null && break; sleep 0.1; done
grep -q OPENSTACK_SIM_URL "$STATE/openstacksim.out" || { cat "$STATE/openstacksim.log"; exit 1; }
# Operations run under a credential of their own (docs/design/operations.md): a second cloud "sim-ops" in the same clouds.yaml (the simulator has
# one application credential, so the same one here).
sed -n '2,$p' "$STATE/clouds.yaml" | sed '1s/^  sim:/  sim-ops:/' >>"$STATE/clouds.yaml"

echo ">> creating a throwaway CA, the hub's TLS certificate and client keys in .demo/pki"
PKI=$STATE/pki
rm -rf "$PKI"
mkdir -p "$PKI"
bin/ironlink-hub dev-pki --dir "$PKI" >/dev/null
bin/ironlink-hub keygen --client-id ironlink-agent-demo --out "$PKI/satellite.pem" 2>/dev/null >"$PKI/satellite.entry"
bin/ironlink-hub keygen --client-id demo-operator --scopes operations:read,operations:write \
  --out "$PKI/operator.pem" 2>/dev/null >"$PKI/operator.entry"
{
  echo "satellites:"
  grep -v '^#' "$PKI/satellite.entry"
  echo "operators:"
  grep -v '^#' "$PKI/operator.entry"
} >"$PKI/roster.yaml"

# The quarantine policy (docs/reference/policy.md): live for GPU faults
# (DEMO_POLICY_DRY_RUN=true: dry-run), guarded (10 automatic quarantines an
# hour, and 1 per rack, so the demo's burst in one rack leaves pending
# actions and a common cause); the simulator's churn
# (deploy failures, power failures) is only logged by the dry-run rules.
cat >"$STATE/policy.yaml" <<EOP
policy:
  default:
    enabled: true
    dryRun: ${DEMO_POLICY_DRY_RUN:-false}
    guard:
      maxDevices: 10
      maxPercent: 25
      window: 1h
      perLabel:
        - {label: rack, maxDevices: 1}
    rules:
      - name: gpu-fatal
        to: [FAULTED]
        health: {componentClasses: [GPU]}
        holdDown: 0s
      - name: offered-faulted
        to: [FAULTED]
        holdDown: 30s
        dryRun: true
      - name: power-failure
        to: [MAINTENANCE]
        reasons: [PowerFailure]
        holdDown: 2m
        autoReleaseAfter: 30m
        dryRun: true
EOP

# The hardware profile of the simulator's machines (docs/reference/conditions.md
# "HardwareMatchesProfile"): --hardware gives every inspected node
# seed-inventory's 8-GPU server, but node-006 has 7 GPUs and node-009 runs
# BIOS 1.4.2 with Hyper-Threading on; they turn HardwareMatchesProfile=False
# (a warning: fault false keeps the status) and are the outliers of
# `ironlink drift` and the fleet view's /drift.
cat >"$STATE/hwprofiles.yaml" <<EOP
profiles:
  - name: gpu-h100
    match: {resource_class: gpu-h100}
    fault: false
    expect:
      cpu_count: {min: 224}
      memory_mib: {min: 2097152}
      gpus: {count: {exactly: 8}, vendor_id: "10de", product_id: "2330"}
      bios_settings: {HyperThreading: Disabled}
      firmware_min: {bios: 1.5.0}
EOP

# The key that seals ENROL BMC credentials into the database
# (docs/reference/operations.md), the same for every replica: whichever holds the site's link
# delivers an enrolment any of them took.
[ -s "$STATE/enrol.key" ] || (umask 077 && head -c 32 /dev/urandom | base64 >"$STATE/enrol.key")

start_hub() { # name listen admin
  bin/ironlink-hub --database-url "$db" --listen "$2" --admin-addr "$3" --replica "$1" --stale-after 1m \
    --roster "$PKI/roster.yaml" --tls-cert "$PKI/server.pem" --tls-key "$PKI/server-key.pem" \
    --policy-file "$STATE/policy.yaml" --hardware-profiles-file "$STATE/hwprofiles.yaml" \
    --enrol-key-file "$STATE/enrol.key" --health-default-ttl 24h \
    --web-addr "unix:$STATE/web-$1.sock" --web-auth proxy >"$STATE/$1.log" 2>&1 &
  pids+=($!)
  echo $! >"$STATE/$1.pid"
  for _ in $(seq 100); do grep -q "hub serving" "$STATE/$1.log" && return 0; sleep 0.2; done
  cat "$STATE/$1.log"
  return 1
}
replicas=${DEMO_REPLICAS:-1}
if [ "$replicas" = 1 ]; then
  echo ">> starting ironlink-hub on $HUB (log: .demo/hub.log)"
  start_hub hub "$HUB" "${DEMO_ADMIN_ADDR:-127.0.0.1:9090}"
  core+=("$(cat "$STATE/hub.pid")")
  admins=("${DEMO_ADMIN_ADDR:-127.0.0.1:9090}")
else
  backends=()
  for i in $(seq "$replicas"); do
    addr=127.0.0.1:$((7070 + i))
    echo ">> starting ironlink-hub replica hub-$i on $addr (log: .demo/hub-$i.log)"
    start_hub "hub-$i" "$addr" "127.0.0.1:$((9090 + i))"
    admins+=("127.0.0.1:$((9090 + i))")
    backends+=(--backend "$addr")
  done
  echo ">> starting the ironlink-lb load balancer on $HUB"
  bin/ironlink-lb --listen "$HUB" "${backends[@]}" >"$STATE/lb.log" 2>&1 &
  pids+=($!)
  core+=($!)
fi

# The fleet view: each hub serves it on a unix socket in .demo (proxy mode:
# whoever may open the socket is the trusted proxy); ironlink-hub web-proxy
# stands in for oauth2-proxy on loopback, lets in the browser that presents
# the secret token once, and names it demo-operator to the hub.
WEB=${DEMO_WEB_ADDR:-127.0.0.1:7080}
(umask 077; head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$STATE/web-token"
  echo "http://$WEB/?token=$(cat "$STATE/web-token")" >"$STATE/web-url")
# With several replicas it names every replica's view: the first that
# answers serves (hub-1, else hub-2, ...), so the view outlives a killed one.
web_upstreams=(--upstream "unix:$STATE/web-hub.sock")
if [ "$replicas" != 1 ]; then
  web_upstreams=()
  for i in $(seq "$replicas"); do web_upstreams+=(--upstream "unix:$STATE/web-hub-$i.sock"); done
fi
echo ">> starting the fleet view's token proxy on $WEB (log: .demo/web-proxy.log)"
bin/ironlink-hub web-proxy --listen "$WEB" "${web_upstreams[@]}" --user demo-operator \
  --token-file "$STATE/web-token" >"$STATE/web-proxy.log" 2>&1 &
pids+=($!)

echo ">> starting ironlink-satellite for site 'demo' (log: .demo/satellite.log; restart: .demo/start-satellite.sh)"
# The satellite's command line, kept as a script so that it can be started
# again by hand after a kill (as a user restarting it would).
cat >"$STATE/start-satellite.sh" <<EOS
#!/usr/bin/env bash
# Starts the demo's satellite in the background with the flags make demo
# used (log appended to .demo/satellite.log, pid in .demo/satellite.pid).
# Restart it: kill \$(cat .demo/satellite.pid); .demo/start-satellite.sh
set -euo pipefail
cd "$PWD"
alive() { case "\$(ps -o stat= -p "\$1" 2>/dev/null)" in "" | Z*) return 1 ;; esac; }
if p=\$(cat "$STATE/satellite.pid" 2>/dev/null); then
  # just killed: give it up to 15 s to finish shutting down
  for _ in \$(seq 150); do alive "\$p" || break; sleep 0.1; done
  if alive "\$p"; then
    echo "the demo satellite is still running (pid \$p): kill it first" >&2
    exit 1
  fi
fi
nohup bin/ironlink-satellite --site demo --hub "$HUB" --clouds-yaml "$STATE/clouds.yaml" --cloud sim --operations-cloud sim-ops \\
  --client-key "$PKI/satellite.pem" --hub-ca "$PKI/ca.pem" --state-file "$STATE/satellite-state.json" \\
  --health-socket "$STATE/health.sock" --label-map rack=extra.rack \\
  --poll-interval "${DEMO_POLL_INTERVAL:-10s}" --sweep-interval "${DEMO_SWEEP_INTERVAL:-15s}" \\
  --metrics-addr "${DEMO_METRICS_ADDR:-127.0.0.1:9108}" >>"$STATE/satellite.log" 2>&1 </dev/null &
echo \$! >"$STATE/satellite.pid"
echo "demo satellite started (pid \$!, log: .demo/satellite.log)"
EOS
chmod +x "$STATE/start-satellite.sh"
: >"$STATE/satellite.log"
"$STATE/start-satellite.sh" >/dev/null

psql_bin=$(pg_bindir)/psql
device=""
for _ in $(seq 150); do
  # A plain AVAILABLE device: not one of the orphans the simulator seeded
  # (their nodes are in its log) nor one the sweep reported.
  orphans=$(grep 'seeded deliberate orphans' "$STATE/openstacksim.log" | grep -oE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}' |
    sed "s/.*/'&'/" | paste -sd, || true)
  device=$("$psql_bin" "$db" -Atqc "SELECT id FROM devices WHERE status = 'AVAILABLE' AND NOT removed
    AND id NOT IN (${orphans:-'00000000-0000-0000-0000-000000000000'})
    AND CASE WHEN jsonb_typeof(facts->'instance_mismatches') = 'array' THEN jsonb_array_length(facts->'instance_mismatches') = 0 ELSE true END
    ORDER BY id LIMIT 1" 2>/dev/null || true)
  [ -n "$device" ] && break
  sleep 0.2
done
[ -n "$device" ] || { echo "no device reached the hub; see .demo/*.log" >&2; tail -20 "$STATE/satellite.log" >&2; exit 1; }
devname=$("$psql_bin" "$db" -Atqc "SELECT name FROM devices WHERE id = '$device'")

# A context "demo" for the ironlink CLI: always in .demo/ironlink.yaml; also in
# the user's config when that does not exist yet, or already holds this demo's
# context (an earlier make demo). Any other user config is left alone.
# DEMO_USER_CONFIG=0 never touches the user's config.
demo_cfg=$STATE/ironlink.yaml
rm -f "$demo_cfg"
bin/ironlink --config "$demo_cfg" config set-context demo --hub "$HUB" --ca "$PKI/ca.pem" \
  --client-id demo-operator --key "$PKI/operator.pem" --use >/dev/null
user_cfg=${IRONLINK_CONFIG:-${XDG_CONFIG_HOME:-$HOME/.config}/ironlink/config.yaml}
cli="IRONLINK_CONFIG=$demo_cfg bin/ironlink"
cfgnote="(your $user_cfg is left alone; the demo's context is in $demo_cfg)"
if [ "${DEMO_USER_CONFIG:-1}" = 1 ]; then
  if [ ! -e "$user_cfg" ]; then
    bin/ironlink --config "$user_cfg" config set-context demo --hub "$HUB" --ca "$PKI/ca.pem" \
      --client-id demo-operator --key "$PKI/operator.pem" --use >/dev/null
    cli=bin/ironlink cfgnote="(context \"demo\" written to $user_cfg, which did not exist)"
  elif grep -qF "$PKI/operator.pem" "$user_cfg"; then
    bin/ironlink --config "$user_cfg" config set-context demo --hub "$HUB" --ca "$PKI/ca.pem" \
      --client-id demo-operator --key "$PKI/operator.pem" >/dev/null
    cli="bin/ironlink --context demo" cfgnote="(context \"demo\" refreshed in $user_cfg)"
    [ "$(bin/ironlink --config "$user_cfg" config current-context 2>/dev/null)" = demo ] && cli=bin/ironlink
  fi
fi

# cmdline CMD COMMENT: one line of the command lists below, the comments
# lined up 46 columns after the CLI's own name, whatever it and the other
# variables in CMD expand to.
cmdline() { printf '  %-*s # %s' "$((${#cli} + 46))" "$1" "$2"; }

# Part 1, as soon as a device reached the hub: the fleet view and the
# commands that look.
cat <<EOM

ironlink demo is running: hub on $HUB (TLS, client authentication on), satellite for site "demo" (its health door: .demo/health.sock), ${DEMO_NODES:-50} simulated nodes.
Fleet view, to open in a browser on this machine (the link, also in .demo/web-url, signs you in as demo-operator):
http://$WEB/?token=$(cat "$STATE/web-token")

Look around with the ironlink CLI in another terminal, from $PWD $cfgnote:

$(cmdline "$cli get devices" "every device, its status and why")
$(cmdline "$cli get devices --status faulted,maintenance" "what is broken now, and why")
$(cmdline "$cli get sites" "which site stopped reporting")
  $cli describe device $devname
$(cmdline "$cli get devices --orphaned" "orphaned Nova instances (after ~30 s)")
$(cmdline "$cli drift --site demo" "hardware drift: node-006 has 7 GPUs, node-009 runs BIOS 1.4.2 with HT on (also /drift in the fleet view)")
$(cmdline "$cli get devices --watch" "Ctrl-C stops watching")
$(cmdline "$cli watch --site demo" "the change feed: every status and command change as it commits (Ctrl-C stops it)")

>> setting up the demo's story: new nodes, a GPU fault, the policy at work (about a minute; the commands that act follow)
EOM

# Part 2: two new nodes enrolled through the hub, then the story
# (scripts/demo-scenario.sh).
printf '[{"name":"demo-new-1","driver":"fake-hardware","resourceClass":"gpu-h100","driverInfo":{"fake_bmc_password":"demo-secret"},"ports":[{"address":"52:54:00:0d:00:01","pxeEnabled":true}]},
 {"name":"demo-new-2","driver":"fake-hardware","resourceClass":"gpu-h100","ports":[{"address":"52:54:00:0d:00:02","pxeEnabled":true}]}]\n' >"$STATE/enrol.json"
echo ">> enrolling nodes demo-new-1 and demo-new-2 through the hub (ironlink op start enrol ... --wait)"
for _ in $(seq 50); do # until the satellite announced the operations capability
  if out=$(bin/ironlink --config "$demo_cfg" op start enrol --site demo --nodes "$STATE/enrol.json" --reason "demo: new nodes" --wait --timeout 60s 2>&1); then
    echo "$out"
    break
  fi
  case $out in *'does not offer the "operations" capability'*) sleep 0.2 ;; *) echo "$out" >&2; break ;; esac
done
. scripts/demo-scenario.sh
story=1
run_scenario || story=0

SIM="bin/ironlink-openstacksim health --socket $STATE/health.sock"
cat <<EOM

The ironlink CLI, acting (quarantine and release wait until the site applied them):

  $cli quarantine $devname --reason "GPU 3 throws Xid 79" --wait
  $cli release $devname --reason "GPU replaced" --wait
$(cmdline "$cli op list --site demo" "operations: the enrolment done, provide demo-new-2 in progress")
  $cli op start provide demo-new-1 --site demo --reason "to customers" --wait
EOM
if [ "$story" = 1 ]; then
  cat <<EOM

The story so far: GPU faults reported through the satellite's health door (NVSentinel's interface;
the checker here is a simulator), FAULTED devices, the policy (.demo/policy.yaml, live for GPU faults,
at most 10 automatic quarantines an hour and 1 per rack) quarantining, a quarantine that failed and
was retried, a burst of faults in rack $sc_rack that tripped the per-rack guard, which names their
common cause (also in the fleet view's policy page: http://$WEB/policy?token=$(cat "$STATE/web-token")):

$(cmdline "$cli describe device demo/$sc_gpu" "FAULTED by GPU/SysLogsXIDError (XID 79), quarantined by the policy")
$(cmdline "$cli get devices --impairment quarantined" "who quarantined what, and why")
$(cmdline "$cli get decisions --site demo" "every decision of the policy, and why")
$(cmdline "$cli get commands --device demo/$sc_failed" "the policy's quarantine FAILED (Ironic refused it), retried: SUCCEEDED")
$(cmdline "$cli get devices -l rack=$sc_rack" "the burst's rack (label rack, from Ironic's extra.rack)")
$(cmdline "$cli policy guard demo" "the guard: tripped by the burst, since when, by which rule; CAUSE: \"n of m new faults are in rack $sc_rack\"")
$(cmdline "$cli get pending" "automatic quarantines the guard held back, waiting for you")
  $cli approve ${sc_pending[0]} --reason "confirmed broken"
  $cli reject ${sc_pending[1]} --reason "false alarm: rack $sc_rack's switch flapped"
$(cmdline "$cli describe device demo/$sc_warn" "warnings (thermal, PSU, XID 63): the status stays")
$(cmdline "$SIM --list" "the faults the health-checker simulator sends")
$(cmdline "$SIM --fault xid79 --healthy $sc_gpu" "the GPU was replaced: its check passes again")
$(cmdline "$cli release demo/$sc_gpu --all-holds --reason \"GPU replaced\" --wait" "the policy holds it: --all-holds gives back what the quarantine took")
EOM
else
  echo ">> the demo's story did not complete (see above and .demo/*.log); the policy and health commands are left out" >&2
fi

# Part 3: the raw API through grpcurl, once it is installed.
if [ -n "$grpcurl_pid" ]; then
  echo
  echo ">> waiting for the grpcurl install (started at the beginning; log: .demo/grpcurl-install.log)"
  wait "$grpcurl_pid" || echo ">> installing grpcurl failed (.demo/grpcurl-install.log); the grpcurl commands below need it" >&2
fi
if ! command -v grpcurl >/dev/null; then
  case ":$PATH:" in
    *":$gobin:"*) ;;
    *) export PATH=$PATH:$gobin; pathnote="(grpcurl is in $gobin: export PATH=\$PATH:$gobin)" ;;
  esac
fi

G="grpcurl -cacert $PKI/ca.pem"
if [ -n "${PRIVATE_PG_DIR:-}" ]; then
  pg_as="" # the cluster's owner: postgres when the demo runs as root
  [ "$(id -u)" -eq 0 ] && pg_as="runuser -u postgres -- "
  pg_drill="
  # stop PostgreSQL: /readyz turns 503 and the gRPC health NOT_SERVING within seconds; start it: both recover
  $pg_as$(pg_bindir)/pg_ctl -D $PRIVATE_PG_DIR/data -m fast -w stop
  $pg_as$(pg_bindir)/pg_ctl -D $PRIVATE_PG_DIR/data -l $PRIVATE_PG_DIR/postgres.log -o '-c listen_addresses=127.0.0.1 -p ${DEMO_PG_PORT:-55432} -k $PRIVATE_PG_DIR -c fsync=off' -w start
"
fi
A='-H "authorization: Bearer $(ironlink_token)"'
approve_g="" # the third pending action the demo left, approved through the API
if [ "$story" = 1 ] && [ -n "${sc_pending[2]:-}" ]; then
  approve_g="
  $G $A -d '{\"ids\":[${sc_pending[2]}],\"reason\":\"confirmed broken\"}' $HUB ironlink.v1.PolicyService/ApprovePendingActions"
fi
cat <<EOM

The same through grpcurl${pathnote:+ $pathnote}:
First define how to mint a short-lived operator token
(a private-key JWT for client demo-operator; each call gets a fresh one):

  ironlink_token() { $PWD/bin/ironlink-hub token --key $PKI/operator.pem --client-id demo-operator; }

  # what the hub serves (server reflection needs no token)
  $G $HUB list

  # sites: link state, site conditions (OpenStackAuthenticated, OrphanDetection), orphan count
  $G $A $HUB ironlink.v1.FleetService/ListSites

  # devices of the site, a page at a time; only the faulted ones
  $G $A -d '{"site":"demo","page_size":5}' $HUB ironlink.v1.FleetService/ListDevices
  $G $A -d '{"statuses":["OPERATIONAL_STATUS_FAULTED"]}' $HUB ironlink.v1.FleetService/ListDevices

  # one device: conditions, status, status and quarantine history
  $G $A -d '{"device_id":"$device"}' $HUB ironlink.v1.FleetService/GetDevice

  # quarantine it, then watch CustomerReady turn False and status turn QUARANTINED
  $G $A -d '{"device_id":"$device","reason":"GPU 3 throws Xid 79"}' $HUB ironlink.v1.FleetService/QuarantineDevice
  $G $A -d '{"device_id":"$device"}' $HUB ironlink.v1.FleetService/GetDevice

  # its commands (state SUCCEEDED once the satellite applied it), then release it
  $G $A -d '{"device_id":"$device"}' $HUB ironlink.v1.FleetService/ListCommands
  $G $A -d '{"device_id":"$device","reason":"GPU replaced"}' $HUB ironlink.v1.FleetService/ReleaseDevice

  # the change feed, as changes commit (Ctrl-C ends it; "cursor":"<a cursor it printed>" resumes)
  $G $A -d '{"site":"demo"}' $HUB ironlink.v1.FleetService/WatchFleet

  # orphaned Nova instances (two seeded, one of each kind; reported after two sweeps, ~30 s; the simulator's churn may redeploy one later, which ends it)
  $G $A -d '{"site":"demo","instance_mismatch":true}' $HUB ironlink.v1.FleetService/ListDevices

  # the quarantine policy (.demo/policy.yaml; edit the file and the hub reloads it):
  # what is in force, what it decided, what waits, the guard
  $G $A -d '{"site":"demo"}' $HUB ironlink.v1.PolicyService/GetEffectivePolicy
  $G $A -d '{"site":"demo"}' $HUB ironlink.v1.PolicyService/ListPolicyDecisions
  $G $A -d '{"site":"demo"}' $HUB ironlink.v1.PolicyService/ListPendingActions
  $G $A -d '{"site":"demo"}' $HUB ironlink.v1.PolicyService/ListSitePolicyStates$approve_g
  $G $A -d '{"device_id":"$device","kind":"DEVICE_HOLD_KIND_EXCLUSION","reason":"burn-in"}' $HUB ironlink.v1.PolicyService/SetDeviceHold
  curl -s http://${admins[0]}/metrics | grep ^ironlink_policy_
  # operations (docs/reference/operations.md): enrol another node, list them
  $G $A -d '{"kind":"OPERATION_KIND_ENROL","site":"demo","reason":"new node","nodes":[{"name":"demo-new-3","driver":"fake-hardware","resource_class":"gpu-h100","ports":[{"address":"52:54:00:0d:00:03","pxe_enabled":true}]}]}' $HUB ironlink.v1.OperationService/StartOperation
  $G $A -d '{"site":"demo"}' $HUB ironlink.v1.OperationService/ListOperations

  # the satellite's own metrics and readiness (hub link up, last poll recent)
  curl -s http://${DEMO_METRICS_ADDR:-127.0.0.1:9108}/metrics | grep ^ironlink_
  curl -s http://${DEMO_METRICS_ADDR:-127.0.0.1:9108}/readyz

  # restart the satellite (the demo keeps running; ListSites shows the link come back)
  kill \$(cat $STATE/satellite.pid); sleep 1; $STATE/start-satellite.sh

  # the hub's admin listener: metrics, liveness, readiness (PostgreSQL reachable, schema current)
  curl -s http://${admins[0]}/metrics | grep -E '^ironlink_hub_(links_open|site_stale|commands_open|ready)'
  curl -s http://${admins[0]}/readyz; $G $HUB grpc.health.v1.Health/Check
${pg_drill:-}
The first hour with this demo, step by step: docs/tutorial.md; everything else: docs/README.md.
Logs: .demo/hub*.log, .demo/satellite.log, .demo/openstacksim.log. Keys, certificates and the
roster: .demo/pki. Press Ctrl-C to stop everything (or kill -TERM \$(cat .demo/demo.pid)).
EOM
if [ "$replicas" != 1 ]; then
  cat <<EOM

$replicas hub replicas run behind the load balancer. Kill one and watch the
satellite move to another (ListSites shows the replica holding the link):

  # the replica holding the link (ListSites' replica), then kill it:
  r=\$($psql_bin "$db" -Atqc "SELECT link_replica FROM sites WHERE name = 'demo'"); echo "\$r"
  kill -9 \$(cat $STATE/\$r.pid)
  $G $A $HUB ironlink.v1.FleetService/ListSites
EOM
fi
# The satellite is not waited for: it may be stopped and started again.
wait -n "${core[@]}" || true
echo ">> a demo process exited unexpectedly (the simulator or the hub); see .demo/*.log" >&2
exit 1
