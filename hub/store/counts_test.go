package store_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestStatusCountsFollowDevices: the per-site, per-status counts that
// ListSites and the fleet view read (migration 00052) equal a count of the
// live device rows after devices arrive, change status, are removed and
// come back, before and after the deltas are folded; ListSites' device
// counts are their sums.
func TestStatusCountsFollowDevices(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, testlog.New(t))
	a := storetest.NewSite(t, st, "a", 6, nil)
	b := storetest.NewSite(t, st, "b", 3, nil)
	at := time.Now()
	reportHealthy(at, a, b)
	check := func(when string, sites []string) {
		t.Helper()
		rows := pgtest.QueryString(t, url, `SELECT COALESCE(string_agg(site || '/' || status || '=' || n, ',' ORDER BY site, status), '')
			FROM (SELECT site, status, count(*) n FROM devices WHERE NOT removed AND ($1::text[] IS NULL OR site = ANY($1)) GROUP BY site, status) x`, sites)
		got := map[string]int{}
		counts, err := st.StatusCounts(ctx, sites)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, c := range counts {
			got[c.Site+"/"+string(c.Status)] += c.N
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, got[k]))
		}
		if s := strings.Join(parts, ","); s != rows {
			t.Fatalf("%s: counts %q, devices %q", when, s, rows)
		}
		list, err := st.ListSites(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE site = $1 AND NOT removed`, s.Name)
			if s.DeviceCount != n {
				t.Fatalf("%s: ListSites says %d devices at %s, %d live", when, s.DeviceCount, s.Name, n)
			}
		}
	}
	check("after the snapshots", nil)
	a.Fault(a.IDs[:2], "PowerFailure", at)
	check("after two faults", nil)
	check("site b only", []string{"b"})
	pgtest.MustExec(t, url, `UPDATE devices SET removed = true WHERE id = $1`, b.IDs[0])
	pgtest.MustExec(t, url, `UPDATE devices SET status = 'MAINTENANCE' WHERE id = ANY($1::uuid[])`, a.IDs[2:4])
	check("after a removal and two changes", nil)
	pgtest.MustExec(t, url, `UPDATE devices SET removed = false WHERE id = $1`, b.IDs[0])
	a.Heal(a.IDs[0])
	check("after a return and a heal", nil)
	pgtest.MustExec(t, url, `SELECT device_status_counts_fold()`)
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_status_counts`); n != pgtest.Count(t, url,
		`SELECT count(*) FROM (SELECT DISTINCT site, status FROM devices WHERE NOT removed) x`) {
		t.Fatalf("after a fold: %d delta rows", n)
	}
	check("after a fold", nil)
	check("no site", []string{})
}

// TestPolicySitesFoldsStatusCounts: the policy's site view counts each
// site's live devices right and folds the status count deltas once it
// summed more than a fold's worth, so its full pass (every second) does
// not sum every status change since the last fold. Before, PolicySites
// summed them per site inside its own statement and never folded: 5,000
// delta rows stayed 5,000.
func TestPolicySitesFoldsStatusCounts(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, testlog.New(t))
	a := storetest.NewSite(t, st, "a", 4, nil)
	b := storetest.NewSite(t, st, "b", 2, nil)
	at := time.Now()
	reportHealthy(at, a, b)
	// 2,500 status changes of one device of a: two delta rows each.
	pgtest.MustExec(t, url, `DO $$ BEGIN FOR i IN 1..2500 LOOP
		UPDATE devices SET status = CASE WHEN status = 'FAULTED' THEN 'AVAILABLE' ELSE 'FAULTED' END WHERE id = '`+a.IDs[0]+`';
	END LOOP; END $$`)
	pgtest.MustExec(t, url, `UPDATE devices SET removed = true WHERE id = $1`, a.IDs[1])
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_status_counts`); n < 5000 {
		t.Fatalf("setup: %d delta rows, want over 5,000", n)
	}
	for pass := 1; pass <= 2; pass++ {
		sites, err := st.PolicySites(ctx, at.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, s := range sites {
			got[s.Name] = s.Devices
		}
		if want := map[string]int{"a": 3, "b": 2}; !maps.Equal(got, want) {
			t.Fatalf("pass %d: PolicySites counts %v live devices, want %v", pass, got, want)
		}
		if n := pgtest.Count(t, url, `SELECT count(*) FROM device_status_counts`); n > 4 {
			t.Fatalf("pass %d: %d delta rows left after PolicySites, want them folded to one per site and status (at most 4)", pass, n)
		}
	}
}

// reportHealthy sends every device of each site, all healthy as observed
// at at, one batch a site.
func reportHealthy(at time.Time, sites ...*storetest.Site) {
	for _, site := range sites {
		ups := make([]store.DeviceUpdate, 0, len(site.IDs))
		for _, id := range site.IDs {
			ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: storetest.Healthy(at), ObservedTime: at})
		}
		site.Send(ups)
	}
}

// TestStatusCountsFoldOnlyWhatAFoldRemoves: a fleet with more (site,
// status) keys than a fold's threshold, already folded, is not folded
// again on every read (each fold rewrites every row: the policy's pass
// reads the counts every second). Before, 5,000 folded keys were
// rewritten by every read.
func TestStatusCountsFoldOnlyWhatAFoldRemoves(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, testlog.New(t))
	// 5,000 sites' counts, one row each, as a fold leaves them.
	pgtest.MustExec(t, url, `INSERT INTO device_status_counts (site, status, n)
		SELECT 'site-' || i, 'AVAILABLE', 1 FROM generate_series(1, 5000) i`)
	rows := func() string {
		return pgtest.QueryString(t, url, `SELECT string_agg(xmin::text, ',' ORDER BY site) FROM device_status_counts`)
	}
	before := rows()
	for range 2 {
		live, err := st.LiveDevices(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != 5000 || live["site-42"] != 1 {
			t.Fatalf("LiveDevices: %d sites, site-42 has %d, want 5,000 sites of 1", len(live), live["site-42"])
		}
	}
	if rows() != before {
		t.Fatal("the folded rows were rewritten by a read: a fold ran with nothing to remove")
	}
}
