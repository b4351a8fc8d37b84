package policy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/test/harness"
)

// The tests of this file run the real binaries: ironlink-hub with a policy
// file (its evaluator at a 500 ms interval) and ironlink-satellite polling
// openstacksim every second, each a process of its own.

var bins harness.Binaries

func TestMain(m *testing.M) { harness.Main(m, &bins) }

// realPolicy acts on a FAULTED (DeployFailed) device of site-r after a 2 s
// hold-down, its guard wide enough not to hold it.
const realPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 50, window: 1h}
    rules:
      - name: offered-faulted
        to: [FAULTED]
        reasons: [DeployFailed]
        holdDown: 2s
`

const realSite = "site-r"

// realBed is a hub and a satellite process over one simulator.
type realBed struct {
	sim        *openstacksim.Cloud
	db         string
	hub        *harness.Hub
	sat        *harness.Proc
	satArgs    []string
	satMetrics string
	nodes      []openstacksim.Node
}

// startRealBed starts the simulator (pages of pageLimit nodes) with n
// available nodes, the hub with realPolicy and the satellite, and waits
// until the hub shows every node AVAILABLE.
func startRealBed(t *testing.T, n, pageLimit int, loss openstacksim.FieldLoss) *realBed {
	t.Helper()
	b := &realBed{sim: openstacksim.New(openstacksim.Options{IronicMaxLimit: pageLimit})}
	if err := b.sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.sim.Close() })
	b.sim.DefineTrait(openstacksim.ReadyTrait)
	for i := range n {
		nd := b.sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("r-%02d", i), ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu"})
		b.sim.AddProvider(nd.UUID, nd.UUID, []string{openstacksim.ReadyTrait}) // offered to customers
		b.nodes = append(b.nodes, nd)
	}
	b.sim.SetFieldLoss(loss)
	dir := t.TempDir()
	clouds, pol := filepath.Join(dir, "clouds.yaml"), filepath.Join(dir, "policy.yaml")
	if err := b.sim.WriteCloudsYAML(clouds, "sim"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pol, []byte(realPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	b.db = pgtest.NewDatabase(t)
	b.hub = harness.StartHub(t, bins, b.db, "r1", "--policy-file", pol, "--policy-interval", "500ms")
	b.satMetrics = harness.FreeAddr(t)
	b.satArgs = []string{"--site", realSite, "--hub", b.hub.Addr, "--hub-plaintext", "--no-auth", "--clouds-yaml", clouds, "--cloud", "sim",
		"--poll-interval", "1s", "--max-backoff", "1s", "--state-file", filepath.Join(dir, "state.json"), "--metrics-addr", b.satMetrics}
	b.startSat(t)
	harness.Eventually(t, 60*time.Second, func() error {
		if got := pgtest.Count(t, b.db, `SELECT count(*) FROM devices WHERE site = $1 AND status = 'AVAILABLE'`, realSite); got != n {
			var st []string
			_ = harness.Pool(t, b.db).QueryRow(t.Context(), `SELECT array_agg(status || '/' || status_reason) FROM devices`).Scan(&st)
			return fmt.Errorf("%d of %d devices AVAILABLE at the hub (%v)", got, n, st)
		}
		return nil
	})
	return b
}

func (b *realBed) startSat(t *testing.T) {
	b.sat = harness.Start(t, "ironlink-satellite", bins.Satellite(), b.satArgs...)
}

// setNode changes node i at the site (as Ironic would).
func (b *realBed) setNode(t *testing.T, i int, ps, lastError string) {
	t.Helper()
	if err := b.sim.UpdateNode(b.nodes[i].UUID, func(n *openstacksim.Node) { n.ProvisionState, n.LastError = ps, lastError }); err != nil {
		t.Fatal(err)
	}
}

// status is the hub's status of node i.
func (b *realBed) status(t *testing.T, i int) string {
	var s string
	if err := harness.Pool(t, b.db).QueryRow(t.Context(), `SELECT status FROM devices WHERE id = $1`, b.nodes[i].UUID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// commands counts the hub's commands (every quarantine is one).
func (b *realBed) commands(t *testing.T) int {
	return pgtest.Count(t, b.db, `SELECT count(*) FROM commands`)
}

// pending is the detail of the site's one PENDING AwaitingFreshEvidence
// action, "" when there is none.
func (b *realBed) pending(t *testing.T) string {
	var d []string
	rows, err := harness.Pool(t, b.db).Query(t.Context(), `SELECT detail FROM policy_pending_actions WHERE site = $1 AND state = 'PENDING' AND reason = 'AwaitingFreshEvidence'`, realSite)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		d = append(d, s)
	}
	if len(d) > 1 {
		t.Fatalf("%d pending actions, want at most 1: %q", len(d), d)
	}
	return strings.Join(d, "")
}

// TestListingHazardDuplicateNodeAtTheHub: Ironic lists a node again on the
// next page (pages of 3). The satellite counts it (duplicate_node on its
// /metrics), the hub stores the degraded poll (site condition
// ListingConsistent=False/DuplicateNodes), and a device that turns FAULTED
// meanwhile is not acted on: its trigger waits, pending
// AwaitingFreshEvidence naming the hazard, with no command. Once the
// listing is clean again a fresh poll confirms the fault and the policy
// quarantines it.
func TestListingHazardDuplicateNodeAtTheHub(t *testing.T) {
	b := startRealBed(t, 8, 3, openstacksim.FieldLoss{RepeatMarker: true})
	harness.Eventually(t, 30*time.Second, func() error {
		if n := pgtest.Count(t, b.db, `SELECT count(*) FROM site_conditions WHERE site = $1 AND type = 'ListingConsistent' AND status = 'False' AND reason = 'DuplicateNodes'`, realSite); n != 1 {
			return fmt.Errorf("no ListingConsistent=False/DuplicateNodes at the hub")
		}
		return nil
	})
	if v, _ := promtest.Scrape(t, "http://"+b.satMetrics+"/metrics").Value("ironlink_satellite_listing_hazards_total", "kind", "duplicate_node"); v < 3 {
		t.Errorf("satellite duplicate_node hazards = %v, want at least 3 (one listing of 8 nodes in pages of 3)", v)
	}
	b.setNode(t, 1, "deploy failed", "deploy failed: image checksum mismatch")
	harness.Eventually(t, 30*time.Second, func() error {
		if d := b.pending(t); !strings.Contains(d, "DuplicateNodes") {
			return fmt.Errorf("no pending action naming the hazard (status %s, detail %q)", b.status(t, 1), d)
		}
		return nil
	})
	if n := b.commands(t); n != 0 {
		t.Fatalf("%d commands on a degraded listing", n)
	}
	b.sim.SetFieldLoss(openstacksim.FieldLoss{})
	harness.Eventually(t, 30*time.Second, func() error {
		if n := pgtest.Count(t, b.db, `SELECT count(*) FROM commands WHERE source = 'policy' AND device_id = $1`, b.nodes[1].UUID); n != 1 {
			return fmt.Errorf("%d policy commands after a clean listing, want 1", n)
		}
		return nil
	})
	if n := b.commands(t); n != 1 {
		t.Errorf("%d commands, want the one quarantine", n)
	}
}

// TestPolicyLinkEndedFaultClearedAtSite is issue 21's case on real
// processes: a device turns FAULTED, the satellite is killed (kill -9)
// before the hold-down is over, the fault is cleared at the site while the
// link is down. The trigger waits (pending AwaitingFreshEvidence, "link
// ended") while the site is not yet UNREACHABLE; the restarted
// satellite's fresh poll clears it: the pending action expires and no
// quarantine is ever sent.
func TestPolicyLinkEndedFaultClearedAtSite(t *testing.T) {
	b := startRealBed(t, 4, 1000, openstacksim.FieldLoss{})
	b.setNode(t, 2, "deploy failed", "deploy failed: image checksum mismatch")
	harness.Eventually(t, 30*time.Second, func() error {
		if s := b.status(t, 2); s != "FAULTED" {
			return fmt.Errorf("device %s at the hub", s)
		}
		return nil
	})
	b.sat.Kill() // within the 2 s hold-down
	b.setNode(t, 2, "available", "")
	harness.Eventually(t, 30*time.Second, func() error {
		if d := b.pending(t); !strings.Contains(d, "link ended") {
			return fmt.Errorf("no pending action for the ended link (detail %q)", d)
		}
		return nil
	})
	if n := pgtest.Count(t, b.db, `SELECT count(*) FROM sites WHERE name = $1 AND stale`, realSite); n != 0 {
		t.Fatal("the site is UNREACHABLE: this case is the link ended before that")
	}
	if n := b.commands(t); n != 0 {
		t.Fatalf("%d commands while the link is down", n)
	}
	b.startSat(t)
	harness.Eventually(t, 60*time.Second, func() error {
		if n := pgtest.Count(t, b.db, `SELECT count(*) FROM policy_pending_actions WHERE site = $1 AND state = 'EXPIRED'`, realSite); n != 1 {
			return fmt.Errorf("pending action not expired (device %s)", b.status(t, 2))
		}
		return nil
	})
	if s := b.status(t, 2); s != "AVAILABLE" {
		t.Errorf("device %s after the fresh poll, want AVAILABLE", s)
	}
	// Two more polls mark the hub, and passes run after them: still no
	// command, and no decision other than the one pending.
	var at time.Time
	if err := harness.Pool(t, b.db).QueryRow(t.Context(), `SELECT observed_time FROM site_conditions WHERE site = $1 AND type = 'InventoryPolled'`, realSite).Scan(&at); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if n := pgtest.Count(t, b.db, `SELECT count(*) FROM site_conditions WHERE site = $1 AND type = 'InventoryPolled' AND observed_time > $2::timestamptz + interval '1 second'`, realSite, at); n != 1 {
			return fmt.Errorf("no later poll mark")
		}
		return nil
	})
	if n := b.commands(t); n != 0 {
		t.Fatalf("%d commands: a healthy node was quarantined", n)
	}
	if n := pgtest.Count(t, b.db, `SELECT count(*) FROM policy_decisions WHERE device_id = $1 AND action <> 'PENDING'`, b.nodes[2].UUID); n != 0 {
		t.Errorf("%d decisions other than the pending one", n)
	}
}
