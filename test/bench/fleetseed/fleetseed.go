// Package fleetseed generates a large fleet straight into PostgreSQL for
// the read benchmarks (issue 26 item 4, test/bench/README.md "Reads at a
// million devices"): sites, devices with facts and labels, their current
// conditions, and a year of condition and status history in the hub's
// weekly history partitions, written with COPY into a database migrated as
// in production (migrations.Up) and partitioned by the hub's own partition
// keeper. Everything is deterministic: device i of the fleet has the same
// id, name, labels, status and history in every run.
package fleetseed

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	neturl "net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/store/partitions"
	"github.com/ironlink/ironlink/migrations"
)

// Shape is the size of a generated fleet.
type Shape struct {
	// Sites is the number of sites, named site-000, site-001, ….
	Sites int
	// DevicesPerSite is the number of devices of each site.
	DevicesPerSite int
	// CondHistoryPerDevice is the number of condition_history rows of each
	// device, spread over Weeks.
	CondHistoryPerDevice int
	// StatusHistoryPerDevice is the number of status_history rows of each
	// device, spread over Weeks; the newest is the device's current status.
	StatusHistoryPerDevice int
	// Weeks is the span of the history, ending now: one weekly partition
	// of each history table per week.
	Weeks int
}

// Million is issue 26's fleet: 1,000,000 devices over 100 sites with a
// year of history (8 condition changes and 3 status changes per device).
var Million = Shape{Sites: 100, DevicesPerSite: 10_000, CondHistoryPerDevice: 8, StatusHistoryPerDevice: 3, Weeks: 52}

// Devices is the fleet's device count.
func (s Shape) Devices() int { return s.Sites * s.DevicesPerSite }

func (s Shape) String() string {
	return fmt.Sprintf("%d devices over %d sites, %d device_conditions, %d condition_history and %d status_history rows over %d weekly partitions",
		s.Devices(), s.Sites, s.Devices()*len(ConditionTypes), s.Devices()*s.CondHistoryPerDevice, s.Devices()*s.StatusHistoryPerDevice, s.Weeks)
}

// ConditionTypes are the seven conditions every device carries.
var ConditionTypes = []string{"Enrolled", "ProvisioningHealthy", "MaintenanceClear", "InValidationPool", "InstanceAllocated", "CustomerAllocated", "CustomerReady"}

// Racks and Zones are the label values: device i of a site is in rack
// r<NN> (i mod Racks) and zone z<N> (i mod Zones), so a rack holds
// DevicesPerSite/Racks devices of each site.
const (
	Racks = 20
	Zones = 4
)

// SiteName is the name of site s.
func SiteName(s int) string { return fmt.Sprintf("site-%03d", s) }

// DeviceName is the name of device i of site s (unique in the fleet).
func DeviceName(s, i int) string { return fmt.Sprintf("s%03d-n%05d", s, i) }

// mix is splitmix64: a fixed permutation of uint64 with good spread.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// DeviceID is the id of the fleet's device g (site g mod Sites, index g
// div Sites): random-looking, so ListDevices' id order mixes sites as
// Ironic's UUIDs do, and unique (the low half is g).
func DeviceID(g int) [16]byte {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], mix(uint64(g)))
	binary.BigEndian.PutUint64(u[8:], uint64(g))
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// statusOf is the current status of device g: about 55 % ALLOCATED, 25 %
// AVAILABLE, 5 % IN_SERVICE, 3 % FAULTED, 3 % MAINTENANCE, 3 %
// QUARANTINED, 2 % VALIDATING, 2 % HELD, 1 % UNREACHABLE, 1 % ONBOARDING.
func statusOf(g int, k int) string {
	p := mix(uint64(g)<<8|uint64(k)) % 100
	switch {
	case p < 55:
		return "ALLOCATED"
	case p < 80:
		return "AVAILABLE"
	case p < 85:
		return "IN_SERVICE"
	case p < 88:
		return "FAULTED"
	case p < 91:
		return "MAINTENANCE"
	case p < 94:
		return "QUARANTINED"
	case p < 96:
		return "VALIDATING"
	case p < 98:
		return "HELD"
	case p < 99:
		return "UNREACHABLE"
	default:
		return "ONBOARDING"
	}
}

// Stats is what Seed wrote and how long it took.
type Stats struct {
	Shape Shape
	// Start and End bound the history (End is now, truncated to the hour).
	Start, End time.Time
	Rows       map[string]int64
	Took       map[string]time.Duration
	Total      time.Duration
}

// Seed fills the empty database at url (creating its schema with the
// project's migrations) with a fleet of shape sh, logging progress to log.
// The history tables are re-partitioned as the hub's partition keeper
// leaves them after sh.Weeks weeks of running: a legacy partition before
// the history's start, one partition a week, a tail. Foreign keys are not
// checked during COPY (session_replication_role = replica; the rows are
// consistent by construction; the devices' triggers stay on), then every table is VACUUM ANALYZEd as
// autovacuum would leave it.
func Seed(ctx context.Context, url string, sh Shape, log io.Writer) (Stats, error) {
	began := time.Now()
	st := Stats{Shape: sh, Rows: map[string]int64{}, Took: map[string]time.Duration{}}
	step := func(name string, t0 time.Time, rows int64) {
		st.Took[name] = time.Since(t0)
		st.Rows[name] = rows
		fmt.Fprintf(log, "fleetseed: %-18s %11d rows in %s\n", name, rows, time.Since(t0).Round(time.Millisecond))
	}
	t0 := time.Now()
	if _, err := migrations.Up(ctx, url); err != nil {
		return st, err
	}
	step("migrations", t0, 0)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return st, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	week := 7 * 24 * time.Hour
	st.End = time.Now().UTC().Truncate(time.Hour)
	st.Start = st.End.Add(-time.Duration(sh.Weeks) * week)
	t0 = time.Now()
	for _, t := range []string{"condition_history", "status_history"} {
		q := fmt.Sprintf(`DROP TABLE %[1]s_legacy, %[1]s_tail;
			CREATE TABLE %[1]s_legacy PARTITION OF %[1]s FOR VALUES FROM (MINVALUE) TO ('%[2]s');
			CREATE TABLE %[1]s_tail PARTITION OF %[1]s FOR VALUES FROM ('%[2]s') TO (MAXVALUE)`, t, st.Start.Format(time.RFC3339))
		if _, err := pool.Exec(ctx, q); err != nil {
			return st, fmt.Errorf("re-partition %s: %w", t, err)
		}
	}
	keeper := partitions.NewKeeper(pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	res, err := keeper.Maintain(ctx, partitions.Policy{Interval: week, Ahead: 1}, st.End)
	if err != nil {
		return st, err
	}
	step("partitions", t0, int64(len(res.Created)))

	t0 = time.Now()
	sites := make([][]any, sh.Sites)
	for s := range sites {
		sites[s] = []any{SiteName(s), int64(1000), st.End}
	}
	if err := copyRows(ctx, pool, "sites", []string{"name", "last_sequence", "last_seen_at"}, pgx.CopyFromRows(sites)); err != nil {
		return st, err
	}
	step("sites", t0, int64(sh.Sites))

	n := sh.Devices()
	span := st.End.Sub(st.Start)
	// at is the time of history row k of perDevice of device g.
	at := func(g, k, perDevice int) time.Time {
		frac := float64(mix(uint64(g))%1000) / 1000
		return st.Start.Add(time.Duration((float64(k) + frac) / float64(perDevice) * float64(span) * 0.999))
	}
	current := func(g int) string { return statusOf(g, sh.StatusHistoryPerDevice-1) }

	t0 = time.Now()
	g := 0
	err = copyRows(ctx, pool, "devices", []string{"id", "site", "name", "facts", "first_seen_at", "observed_at", "status", "status_reason", "status_changed_at",
		"desired_impairment", "desired_generation", "applied_generation"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if g == n {
				return nil, nil
			}
			s, i := g%sh.Sites, g/sh.Sites
			id := DeviceID(g)
			status := current(g)
			facts, _ := json.Marshal(map[string]any{
				"name": DeviceName(s, i), "provision_state": "active", "power_state": "power on", "resource_class": "gpu-h100",
				"instance_uuid": fmt.Sprintf("%x", mix(uint64(g)+7)), "lessee": fmt.Sprintf("project-%d", g%37), "owner": "ops",
				"conductor_group": fmt.Sprintf("r%02d", i%Racks), "fault": "",
				"labels": map[string]string{"rack": fmt.Sprintf("r%02d", i%Racks), "zone": fmt.Sprintf("z%d", i%Zones), "gpu": "h100"},
			})
			imp, gen := "NONE", int64(0)
			if status == "QUARANTINED" {
				imp, gen = "QUARANTINED", 1
			}
			row := []any{id, SiteName(s), DeviceName(s, i), facts, st.Start, st.End, status, "Seeded",
				at(g, sh.StatusHistoryPerDevice-1, sh.StatusHistoryPerDevice), imp, gen, gen}
			g++
			return row, nil
		}))
	if err != nil {
		return st, err
	}
	step("devices", t0, int64(n))

	t0 = time.Now()
	g, c := 0, 0
	err = copyRows(ctx, pool, "device_conditions", []string{"device_id", "type", "status", "reason", "last_transition_time", "observed_time"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if g == n {
				return nil, nil
			}
			cs, reason := "True", "Seeded"
			if c == 1 && current(g) == "FAULTED" {
				cs, reason = "False", "ProvisionFailed"
			}
			row := []any{DeviceID(g), ConditionTypes[c], cs, reason, st.Start, st.End}
			if c++; c == len(ConditionTypes) {
				c, g = 0, g+1
			}
			return row, nil
		}))
	if err != nil {
		return st, err
	}
	step("device_conditions", t0, int64(n*len(ConditionTypes)))

	// History in time order (row k of every device, then k+1): each COPY
	// buffer goes to one or two partitions, as the hub's writes do.
	t0 = time.Now()
	g, k := 0, 0
	err = copyRows(ctx, pool, "status_history", []string{"device_id", "status", "reason", "changed_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if k == sh.StatusHistoryPerDevice {
				return nil, nil
			}
			row := []any{DeviceID(g), statusOf(g, k), "Seeded", at(g, k, sh.StatusHistoryPerDevice)}
			if g++; g == n {
				g, k = 0, k+1
			}
			return row, nil
		}))
	if err != nil {
		return st, err
	}
	step("status_history", t0, int64(n*sh.StatusHistoryPerDevice))

	t0 = time.Now()
	g, k = 0, 0
	err = copyRows(ctx, pool, "condition_history", []string{"device_id", "type", "status", "reason", "message", "last_transition_time", "observed_time", "recorded_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if k == sh.CondHistoryPerDevice {
				return nil, nil
			}
			t := at(g, k, sh.CondHistoryPerDevice)
			cs := "True"
			if (k+g)%3 == 0 {
				cs = "False"
			}
			row := []any{DeviceID(g), ConditionTypes[(k+g)%len(ConditionTypes)], cs, "Seeded", "", t, t, t}
			if g++; g == n {
				g, k = 0, k+1
			}
			return row, nil
		}))
	if err != nil {
		return st, err
	}
	step("condition_history", t0, int64(n*sh.CondHistoryPerDevice))

	// The quarantined devices' commands and quarantine history (one each,
	// a month before the end), set-based: a few percent of the fleet.
	t0 = time.Now()
	tag, err := pool.Exec(ctx, `
		WITH c AS (
			INSERT INTO commands (device_id, site, generation, desired, state, actor, reason, source, created_at, updated_at, completed_at)
			SELECT d.id, d.site, 1, 'QUARANTINED', 'SUCCEEDED', 'op', 'seeded', 'operator-api', $1, $1, $1
			FROM devices d WHERE d.desired_impairment = 'QUARANTINED' RETURNING id, device_id)
		INSERT INTO impairment_history (device_id, desired, generation, actor, reason, source, command_id, changed_at)
		SELECT device_id, 'QUARANTINED', 1, 'op', 'seeded', 'operator-api', id, $1 FROM c`, st.End.Add(-45*24*time.Hour))
	if err != nil {
		return st, fmt.Errorf("seed quarantines: %w", err)
	}
	step("quarantines", t0, tag.RowsAffected())

	t0 = time.Now()
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return st, fmt.Errorf("vacuum analyze: %w", err)
	}
	step("vacuum analyze", t0, 0)
	st.Total = time.Since(began)
	fmt.Fprintf(log, "fleetseed: %s in %s\n", sh, st.Total.Round(time.Second))
	return st, nil
}

// copyRows COPYs src into table on one connection, with foreign-key
// triggers off except for devices (session_replication_role = replica,
// reset before the connection returns to the pool).
func copyRows(ctx context.Context, pool *pgxpool.Pool, table string, cols []string, src pgx.CopyFromSource) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("copy %s: %w", table, err)
	}
	defer conn.Release()
	// The devices' own triggers keep device_status_counts (migration
	// 00052): they stay on for devices (one statement-level aggregate).
	if table != "devices" {
		if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
			return fmt.Errorf("copy %s: %w", table, err)
		}
		defer conn.Exec(context.WithoutCancel(ctx), `RESET session_replication_role`) //nolint:errcheck // best effort
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, src); err != nil {
		return fmt.Errorf("copy %s: %w", table, err)
	}
	return nil
}

// CreateDatabase creates database name on the server of serverURL and
// returns its URL. Errors: the database exists, or the server refuses.
func CreateDatabase(ctx context.Context, serverURL, name string) (string, error) {
	cfg, err := pgx.ParseConfig(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse server URL: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return DatabaseURL(serverURL, name)
}

// DatabaseURL is serverURL with its database replaced by name.
func DatabaseURL(serverURL, name string) (string, error) {
	u, err := neturl.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse server URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDatabase drops database name (WITH (FORCE): the hub's connections go too).
func DropDatabase(ctx context.Context, serverURL, name string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}
