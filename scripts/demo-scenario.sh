# shellcheck shell=bash
# Sourced by scripts/demo.sh once the hub and the satellite run: the demo's
# story, so that everything an operator looks at exists when the demo has
# printed its commands (docs/tutorial.md, docs/reference/make.md):
#
#   1. a GPU fault (XID 79) arrives through the satellite's local health
#      door (bin/ironlink-openstacksim health, NVSentinel's interface), the
#      device turns FAULTED and the policy quarantines it;
#   2. a second fault (XID 95) on another device: the policy's quarantine
#      FAILS (the simulator's Ironic refuses the trait removal once, 403,
#      through its control socket) and the demo retries it (`ironlink retry`);
#   3. a burst of faults in one rack (the label rack, from Ironic's
#      extra.rack) trips the policy's per-rack guard (1 automatic quarantine
#      per rack an hour): the rest wait as pending actions, left for you,
#      and the guard names the common cause ("4 of 6 new faults are in
#      rack r2");
#   4. warnings (thermal, PSU, XID 63) that leave the status alone;
#   5. an operation in progress (provide demo-new-2).
#
# Uses from demo.sh: STATE, db, psql_bin, demo_cfg, device, orphans.
# Sets for the commands demo.sh prints afterwards: sc_gpu (the XID 79
# device), sc_failed (the failed-then-retried one), sc_failed_cmd (its
# failed command), sc_pending (the pending actions left for you, ids),
# sc_warn (a device with warnings), sc_rack (the burst's rack), sc_fault_ms,
# sc_quarantine_ms (what step 1 measured).

# sc_q runs one SQL query against the demo's database, quietly.
sc_q() { "$psql_bin" "$db" -Atqc "$1" 2>/dev/null || true; }

# sc_ctl runs the ironlink CLI with the demo's context.
sc_ctl() { bin/ironlink --config "$demo_cfg" "$@"; }

# sc_health sends health events through the satellite's door.
sc_health() { bin/ironlink-openstacksim health --socket "$STATE/health.sock" "$@"; }

# sc_until SECONDS WHAT COMMAND...: runs COMMAND every 0.2 s until it
# succeeds; after SECONDS says what it waited for and fails.
sc_until() {
  local end=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if ((SECONDS >= end)); then
      echo ">> gave up waiting for $what (see .demo/hub.log, .demo/satellite.log)" >&2
      return 1
    fi
    sleep 0.2
  done
}

# sc_rack_of NAME is the rack label of device NAME (the satellite's
# --label-map rack=extra.rack, or the hub's labels file).
sc_rack_of() { sc_q "SELECT ironlink_device_labels(site, name, id, facts)->>'rack' FROM devices WHERE site = 'demo' AND name = '$1'"; }

# sc_id NAME is the id of the demo site's device NAME.
sc_id() { sc_q "SELECT id FROM devices WHERE site = 'demo' AND name = '$1'"; }

# sc_status NAME is the status of device NAME.
sc_status() { sc_q "SELECT status FROM devices WHERE site = 'demo' AND name = '$1'"; }

# sc_cmd_state NAME is the state of the newest quarantine command of NAME.
sc_cmd_state() {
  sc_q "SELECT state FROM commands WHERE device_id = '$(sc_id "$1")' AND desired = 'QUARANTINED' ORDER BY generation DESC LIMIT 1"
}

sc_is() { [ "$("${@:2}")" = "$1" ]; }

sc_ms() { echo $((($(date +%s%N) - $1) / 1000000)); }

# sc_pending_ids lists the site's pending actions' ids, oldest first.
sc_pending_ids() { sc_q "SELECT id FROM policy_pending_actions WHERE site = 'demo' AND state = 'PENDING' ORDER BY id"; }

sc_pending_at_least() { [ "$(sc_pending_ids | grep -c .)" -ge "$1" ]; }

# sc_cause_names_rack succeeds once the guard's common cause names the
# burst's rack (ironlink policy guard, CAUSE column).
sc_cause_names_rack() { sc_ctl policy guard demo 2>/dev/null | grep -q "in rack $sc_rack"; }

run_scenario() {
  # Devices offered to customers (the policy acts only on those), not the
  # device the printed commands use, not a seeded orphan, by name.
  local offered
  mapfile -t offered < <(sc_q "SELECT name FROM devices WHERE site = 'demo' AND NOT removed
    AND status IN ('AVAILABLE', 'ALLOCATED', 'IN_SERVICE') AND id <> '$device'
    AND id NOT IN (${orphans:-'00000000-0000-0000-0000-000000000000'}) AND name LIKE 'node-%' ORDER BY name")
  if [ "${#offered[@]}" -lt 4 ]; then
    echo ">> only ${#offered[@]} devices are offered to customers; the policy's story needs 4" >&2
    return 1
  fi

  # 1. A GPU fault, FAULTED, quarantined by the policy.
  sc_gpu=${offered[0]}
  echo ">> a GPU fault: $sc_gpu reports XID 79 through the satellite's health door"
  local t0
  t0=$(date +%s%N)
  sc_health --fault xid79 "$sc_gpu" >/dev/null || return 1
  sc_until 30 "$sc_gpu to turn FAULTED" sc_is FAULTED sc_status "$sc_gpu" || return 1
  sc_fault_ms=$(sc_ms "$t0")
  sc_until 120 "the policy to quarantine $sc_gpu" sc_is SUCCEEDED sc_cmd_state "$sc_gpu" || return 1
  sc_quarantine_ms=$(sc_ms "$t0")
  echo ">> $sc_gpu: FAULTED ${sc_fault_ms} ms after the report, quarantined by the policy (trait removed) after ${sc_quarantine_ms} ms"

  # 2. A quarantine that fails once, retried.
  # in another rack than the first (the policy's guard allows one
  # automatic quarantine per rack an hour)
  local n
  sc_failed=""
  for n in "${offered[@]:1}"; do
    if [ "$(sc_rack_of "$n")" != "$(sc_rack_of "$sc_gpu")" ]; then
      sc_failed=$n
      break
    fi
  done
  if [ -z "$sc_failed" ]; then
    echo ">> every device offered to customers is in rack $(sc_rack_of "$sc_gpu"); the story needs two racks" >&2
    return 1
  fi
  local uuid
  uuid=$(sc_id "$sc_failed")
  curl -sf --unix-socket "$STATE/openstacksim.sock" -X POST http://sim/faults \
    -d "{\"service\":\"baremetal\",\"method\":\"DELETE\",\"pathContains\":\"$uuid/traits/CUSTOM_CUSTOMER_READY\",\"status\":403,\"times\":1}" || return 1
  echo ">> $sc_failed reports XID 95; the simulated Ironic will refuse its trait removal once (403)"
  sc_health --fault xid95 "$sc_failed" >/dev/null || return 1
  sc_until 120 "the policy's quarantine of $sc_failed to fail" sc_is FAILED sc_cmd_state "$sc_failed" || return 1
  sc_failed_cmd=$(sc_q "SELECT id FROM commands WHERE device_id = '$uuid' AND state = 'FAILED' ORDER BY generation DESC LIMIT 1")
  echo ">> the policy's quarantine of $sc_failed FAILED (command ${sc_failed_cmd:0:8}); retrying it"
  sc_ctl retry "$sc_failed_cmd" --reason "demo: Ironic's policy fixed" --wait --timeout 60s || return 1

  # 3. A rack-correlated burst trips the per-rack guard.
  # The simulator puts node-001..008 in rack r1, node-009..016 in r2, ...
  # (Ironic extra.rack); the satellite maps it to the label rack
  # (--label-map rack=extra.rack). The burst's rack is the one with the
  # most devices offered to customers or HELD (steps 1 and 2 were in other
  # racks); its HELD devices pass burn-in and are offered first, so that the
  # whole rack is in service when it fails.
  sc_rack=$(sc_q "SELECT ironlink_device_labels(site, name, id, facts)->>'rack' FROM devices WHERE site = 'demo' AND NOT removed
    AND status IN ('AVAILABLE', 'ALLOCATED', 'IN_SERVICE', 'HELD') AND name LIKE 'node-%' AND ironlink_device_labels(site, name, id, facts) ? 'rack'
    AND id <> '$device' AND id NOT IN (${orphans:-'00000000-0000-0000-0000-000000000000'})
    AND ironlink_device_labels(site, name, id, facts)->>'rack' NOT IN (SELECT ironlink_device_labels(site, name, id, facts)->>'rack' FROM devices WHERE site = 'demo' AND name IN ('$sc_gpu', '$sc_failed') AND ironlink_device_labels(site, name, id, facts) ? 'rack')
    GROUP BY 1 ORDER BY count(*) FILTER (WHERE status <> 'HELD') + count(*) DESC, count(*) FILTER (WHERE status <> 'HELD') DESC, 1 LIMIT 1")
  if [ -z "$sc_rack" ]; then
    echo ">> no device carries a rack label (is the satellite's --label-map rack=extra.rack set?)" >&2
    return 1
  fi
  local held burst=() offered_now=()
  mapfile -t held < <(sc_q "SELECT name FROM devices WHERE site = 'demo' AND NOT removed AND status = 'HELD'
    AND ironlink_device_labels(site, name, id, facts)->>'rack' = '$sc_rack' AND name LIKE 'node-%' AND id <> '$device' ORDER BY name")
  # One the churn moved meanwhile (offer refused, or not AVAILABLE in time)
  # simply stays out of the burst.
  for n in "${held[@]}"; do
    sc_ctl offer "demo/$n" --reason "demo: burn-in passed" --wait --timeout 60s >/dev/null 2>&1 &&
      sc_until 30 "$n to be offered" sc_is AVAILABLE sc_status "$n" 2>/dev/null && offered_now+=("$n")
  done
  echo ">> rack $sc_rack: HELD devices passed burn-in, offered to customers: ${offered_now[*]:-none}"
  mapfile -t burst < <(sc_q "SELECT name FROM devices WHERE site = 'demo' AND NOT removed
    AND status IN ('AVAILABLE', 'ALLOCATED', 'IN_SERVICE') AND ironlink_device_labels(site, name, id, facts)->>'rack' = '$sc_rack' AND name LIKE 'node-%'
    AND id <> '$device' AND id NOT IN (${orphans:-'00000000-0000-0000-0000-000000000000'}) ORDER BY name")
  if [ "${#burst[@]}" -lt 3 ]; then
    echo ">> rack $sc_rack has only ${#burst[@]} devices offered to customers; the burst needs 3" >&2
    return 1
  fi
  echo ">> a burst in rack $sc_rack (bin/ironlink get devices -l rack=$sc_rack): ${burst[*]} report GPU faults at once"
  local faults=(xid48 xid64 nvlink xid95 xid79) pids=()
  for i in "${!burst[@]}"; do
    sc_health --fault "${faults[i % 5]}" "${burst[i]}" >/dev/null &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || return 1; done
  # The guard (at most 1 automatic quarantine per rack an hour) lets the
  # first through and holds back the rest. The churn may have taken a
  # device of the burst out of service meanwhile (then the policy skips
  # it): two pending actions are enough.
  local want=$((${#burst[@]} - 1))
  if ! sc_until 30 "the guard to hold $want quarantines back" sc_pending_at_least "$want" 2>/dev/null; then
    sc_pending_at_least 2 || { echo ">> the guard held back fewer than 2 quarantines" >&2; return 1; }
  fi
  sc_until 10 "the guard's common cause" sc_cause_names_rack || return 1
  mapfile -t sc_pending < <(sc_pending_ids)
  echo ">> the guard tripped: ${#sc_pending[@]} automatic quarantines wait for an operator; the common cause:"
  sc_ctl policy guard demo | sed 's/^/     /'

  # 4. Warnings: the status stays.
  sc_warn=$(sc_q "SELECT name FROM devices WHERE site = 'demo' AND NOT removed AND status = 'HELD' AND name LIKE 'node-%' ORDER BY name LIMIT 1")
  sc_warn=${sc_warn:-${offered[-1]}}
  sc_health --fault thermal "$sc_warn" >/dev/null && sc_health --fault psu "$sc_warn" >/dev/null &&
    sc_health --fault xid63 "$sc_warn" >/dev/null || return 1
  echo ">> warnings on $sc_warn (thermal, PSU, XID 63): its status stays $(sc_status "$sc_warn")"

  # 5. An operation in progress.
  sc_ctl op start provide demo-new-2 --site demo --reason "demo: burn-in passed" >/dev/null || return 1
  echo ">> provide demo-new-2 started (cleaning, about half a minute)"
}
