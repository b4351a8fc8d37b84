// Package webtest seeds a hub database with sites and devices in chosen
// operational states, and writes rosters of operators, for the fleet view's
// tests (hub/web and the browser suite in test/web). It writes through the
// hub's own store (OpenLink, ApplyBatch: the path a satellite's link takes),
// so statuses are derived by the hub exactly as in production.
package webtest

import (
	"context"
	"crypto"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
)

// Device is one device to seed: its name and the status the hub must derive.
type Device struct {
	Name   string
	Status hubstatus.Status
}

// Conditions returns the seven conditions that make the hub derive st (one
// of ONBOARDING, FAULTED, MAINTENANCE, VALIDATING, IN_SERVICE, ALLOCATED,
// AVAILABLE, HELD), observed at at.
func Conditions(st hubstatus.Status, at time.Time) ([]condition.Condition, error) {
	val := map[condition.Type]condition.Status{
		condition.Enrolled: condition.True, condition.ProvisioningHealthy: condition.True, condition.MaintenanceClear: condition.True,
		condition.InValidationPool: condition.False, condition.InstanceAllocated: condition.False,
		condition.CustomerAllocated: condition.False, condition.CustomerReady: condition.True,
	}
	reason := map[condition.Type]string{}
	switch st {
	case hubstatus.Onboarding:
		val[condition.Enrolled], reason[condition.Enrolled] = condition.False, "Enroll"
	case hubstatus.Faulted:
		val[condition.ProvisioningHealthy], reason[condition.ProvisioningHealthy] = condition.False, "DeployFailed"
	case hubstatus.Maintenance:
		val[condition.MaintenanceClear], reason[condition.MaintenanceClear] = condition.False, "PowerFailure"
	case hubstatus.Validating:
		val[condition.InValidationPool] = condition.True
	case hubstatus.InService:
		val[condition.InstanceAllocated], val[condition.CustomerAllocated] = condition.True, condition.True
	case hubstatus.Allocated:
		val[condition.InstanceAllocated] = condition.True
	case hubstatus.Available:
	case hubstatus.Held:
		val[condition.CustomerReady], reason[condition.CustomerReady] = condition.False, "TraitAbsent"
	default:
		return nil, fmt.Errorf("webtest: cannot seed status %s from conditions", st)
	}
	var out []condition.Condition
	for _, t := range condition.Types {
		r := reason[t]
		if r == "" {
			r = "Seeded" + string(val[t])
		}
		out = append(out, condition.Condition{Type: t, Status: val[t], Reason: r, Message: "seeded by webtest",
			LastTransitionTime: at, ObservedTime: at})
	}
	return out, nil
}

// BootID is the boot id of the satellite process that SeedSite and Report
// play: one process, so that a test's own link with it (a reconnect) is not
// a new process whose snapshot the hub waits for
// (store.SiteEvidence.SnapshotDue).
const BootID = "webtest-satellite"

// SeedSite reports devs as one full snapshot of site (batches of 500), as a
// satellite's first link would, observed now, then closes that link. It
// returns the device ids in the order of devs.
func SeedSite(ctx context.Context, st *store.Store, site string, devs []Device) ([]string, error) {
	return SeedSiteAt(ctx, st, site, time.Now(), devs)
}

// SeedSiteAt is SeedSite with the conditions observed (and transitioned) at at.
func SeedSiteAt(ctx context.Context, st *store.Store, site string, at time.Time, devs []Device) ([]string, error) {
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, BootID: BootID, Version: "webtest", Replica: "webtest-seed"})
	if err != nil {
		return nil, err
	}
	now := at.UTC().Truncate(time.Microsecond)
	snap := uuid.NewString()
	ids := make([]string, len(devs))
	var updates []store.DeviceUpdate
	for i, d := range devs {
		conds, err := Conditions(d.Status, now)
		if err != nil {
			return nil, err
		}
		ids[i] = uuid.NewString()
		updates = append(updates, store.DeviceUpdate{DeviceID: ids[i], Conditions: conds, ObservedTime: now,
			Facts: &store.Facts{Name: d.Name, ProvisionState: "active", PowerState: "power on", ResourceClass: "gpu"}})
	}
	seq := sess.LastSequence
	for first := true; first || len(updates) > 0; first = false {
		n := min(len(updates), 500)
		seq++
		if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: seq, SnapshotID: snap,
			SnapshotFinal: n == len(updates), Devices: updates[:n]}); err != nil {
			return nil, fmt.Errorf("webtest: seed %s: %w", site, err)
		}
		updates = updates[n:]
	}
	if err := st.CloseLink(ctx, site, sess.Epoch); err != nil {
		return nil, err
	}
	return ids, nil
}

// Report sends one delta batch for site on a new link (then closed): each
// device of changes gets the conditions of its new status, observed at at
// (which must be later than what the hub holds, or the hub ignores it).
func Report(ctx context.Context, st *store.Store, site string, at time.Time, changes map[string]hubstatus.Status) error {
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, BootID: BootID, Version: "webtest", Replica: "webtest-seed"})
	if err != nil {
		return err
	}
	at = at.UTC().Truncate(time.Microsecond)
	b := store.Batch{Sequence: sess.LastSequence + 1}
	for id, status := range changes {
		conds, err := Conditions(status, at)
		if err != nil {
			return err
		}
		b.Devices = append(b.Devices, store.DeviceUpdate{DeviceID: id, Conditions: conds, ObservedTime: at})
	}
	if _, err := st.ApplyBatch(ctx, site, sess.Epoch, b); err != nil {
		return fmt.Errorf("webtest: report %s: %w", site, err)
	}
	return st.CloseLink(ctx, site, sess.Epoch)
}

// Operator is a roster operator the tests sign in as.
type Operator struct {
	ClientID string
	Scopes   []string
	// Key is the private key (for mtls: a client certificate over it).
	Key crypto.Signer
	// KeyFile is the key in PEM (mode 0600).
	KeyFile string
}

// WriteRoster writes a roster with ops (and no satellites) into dir and
// returns its path and the operators with their keys.
func WriteRoster(tb testing.TB, dir string, ops map[string][]string) (string, map[string]*Operator) {
	tb.Helper()
	out := map[string]*Operator{}
	var entries []string
	for id, scopes := range ops {
		k, err := auth.GenerateKey(auth.AlgES256)
		if err != nil {
			tb.Fatal(err)
		}
		kid, err := auth.Thumbprint(k.Public())
		if err != nil {
			tb.Fatal(err)
		}
		e, err := auth.FormatRosterEntry(id, "", scopes, kid, k.Public())
		if err != nil {
			tb.Fatal(err)
		}
		path := filepath.Join(dir, id+".pem")
		if err := auth.WritePrivateKeyPEM(path, k); err != nil {
			tb.Fatal(err)
		}
		entries = append(entries, e)
		out[id] = &Operator{ClientID: id, Scopes: scopes, Key: k, KeyFile: path}
	}
	path := filepath.Join(dir, "roster.yaml")
	if err := os.WriteFile(path, []byte("satellites: []\noperators:\n"+strings.Join(entries, "")), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path, out
}
