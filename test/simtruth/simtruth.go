// Package simtruth compares what a hub stored for a site with the truth of
// the built-in OpenStack simulator (internal/openstacksim) that site's
// satellites poll: the fault suite (test/faults) and the soak's invariant
// checker (test/soak) both judge the hub by it, reading PostgreSQL
// directly, not the hub's API.
package simtruth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/test/harness"
)

// WaitDevices waits up to timeout until the hub's database (pool) lists
// every node of sim as a live device of site; it fails tb otherwise.
func WaitDevices(tb testing.TB, pool *pgxpool.Pool, site string, sim *openstacksim.Cloud, timeout time.Duration) {
	tb.Helper()
	want := len(sim.Nodes())
	harness.Eventually(tb, timeout, func() error {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM devices WHERE site = $1 AND NOT removed`, site).Scan(&n); err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("site %s: hub has %d live devices, simulator %d", site, n, want)
		}
		return nil
	})
}

// Diff compares the hub's current conditions of site's devices with what
// the satellite's mapping (satellite/conditions) gives for sim's state now
// (status, reason and message; CustomerReady by status only, as its reason
// also depends on what the satellite process applied). It returns the
// differences (at most about ten), or nil when they agree; a database
// error is returned as is.
func Diff(ctx context.Context, pool *pgxpool.Pool, site string, sim *openstacksim.Cloud) error {
	got, err := stored(ctx, pool, site)
	if err != nil {
		return err
	}
	var errs []error
	nodes := sim.Nodes()
	if len(got) != len(nodes) {
		errs = append(errs, fmt.Errorf("site %s: hub has conditions for %d live devices, simulator has %d nodes", site, len(got), len(nodes)))
	}
	for _, n := range nodes {
		errs = append(errs, diffNode(sim, n, got[n.UUID])...)
		if len(errs) > 10 {
			break
		}
	}
	return errors.Join(errs...)
}

// cond is one stored condition's status, reason and message.
type cond struct{ status, reason, message string }

// stored reads site's live devices' conditions: device id → type → cond.
func stored(ctx context.Context, pool *pgxpool.Pool, site string) (map[string]map[string]cond, error) {
	rows, err := pool.Query(ctx, `
		SELECT c.device_id::text, c.type, c.status, c.reason, c.message
		FROM device_conditions c JOIN devices d ON d.id = c.device_id
		WHERE d.site = $1 AND NOT d.removed`, site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[string]map[string]cond{}
	for rows.Next() {
		var id, typ string
		var c cond
		if err := rows.Scan(&id, &typ, &c.status, &c.reason, &c.message); err != nil {
			return nil, err
		}
		if got[id] == nil {
			got[id] = map[string]cond{}
		}
		got[id][typ] = c
	}
	return got, rows.Err()
}

// diffNode compares node n's stored conditions g with the mapping of its
// simulator state.
func diffNode(sim *openstacksim.Cloud, n openstacksim.Node, g map[string]cond) []error {
	tr, _, ok := sim.ProviderTraits(n.UUID)
	pv := conditions.PlacementView{Read: true, ProviderExists: ok, HasTrait: slices.Contains(tr, openstacksim.ReadyTrait),
		TraitDefined: sim.TraitDefined(openstacksim.ReadyTrait)}
	obs := conditions.Observation{Node: toIronic(n), Now: time.Now(), Placement: pv}
	if srv, ok := sim.Server(n.InstanceUUID); ok && n.InstanceUUID != "" {
		obs.InstanceProject = srv.TenantID // the satellite learns it from Nova
	}
	var errs []error
	for _, w := range conditions.Map(conditions.Config{}, obs) {
		h, ok := g[string(w.Type)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("device %s (%s): no %s at the hub", n.UUID, n.Name, w.Type))
		case string(w.Status) != h.status:
			errs = append(errs, fmt.Errorf("device %s (%s, %s, maint=%v): %s is %s/%s at the hub, simulator says %s/%s",
				n.UUID, n.Name, n.ProvisionState, n.Maintenance, w.Type, h.status, h.reason, w.Status, w.Reason))
		case w.Type != condition.CustomerReady && (w.Reason != h.reason || w.Message != h.message):
			errs = append(errs, fmt.Errorf("device %s (%s): %s is %s/%q at the hub, simulator says %s/%q",
				n.UUID, n.Name, w.Type, h.reason, h.message, w.Reason, w.Message))
		}
	}
	return errs
}

// toIronic is the simulator's node as the satellite's Ironic client reads it.
func toIronic(n openstacksim.Node) ironic.Node {
	return ironic.Node{UUID: n.UUID, Name: n.Name, ProvisionState: n.ProvisionState, TargetProvisionState: n.TargetProvisionState,
		PowerState: n.PowerState, Maintenance: n.Maintenance, MaintenanceReason: n.MaintenanceReason, Fault: n.Fault,
		LastError: n.LastError, InstanceUUID: n.InstanceUUID, AllocationUUID: n.AllocationUUID, ResourceClass: n.ResourceClass,
		ConductorGroup: n.ConductorGroup, Owner: n.Owner, Lessee: n.Lessee, Traits: n.Traits, ProvisionUpdatedAt: n.ProvisionUpdatedAt}
}
