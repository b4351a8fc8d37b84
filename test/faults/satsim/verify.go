package satsim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Verify checks the hub's tables for this site against what was sent:
// sites.last_sequence equals the last sequence sent (all acked), every
// device exists and is not removed, each (device, condition type) has
// exactly the history rows of the changes sent, in order (none lost, none
// doubled), and the current condition is the last one sent.
func (s *Sat) Verify(ctx context.Context, pool *pgxpool.Pool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if len(s.errs) > 0 {
		errs = append(errs, s.errs...)
	}
	var lastSeq int64
	if err := pool.QueryRow(ctx, `SELECT last_sequence FROM sites WHERE name = $1`, s.cfg.Site).Scan(&lastSeq); err != nil {
		return fmt.Errorf("site %s: %w", s.cfg.Site, err)
	}
	if uint64(lastSeq) != s.next-1 || s.lastAcked != s.next-1 {
		errs = append(errs, fmt.Errorf("site %s: hub last_sequence %d, satellite sent up to %d and got acks up to %d", s.cfg.Site, lastSeq, s.next-1, s.lastAcked))
	}
	got, err := s.hubHistory(ctx, pool)
	if err != nil {
		return err
	}
	errs = append(errs, s.compareHistory(got)...)
	var removed, devices int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE removed), count(*) FROM devices WHERE site = $1`, s.cfg.Site).Scan(&removed, &devices); err != nil {
		return err
	}
	if removed != 0 || devices != len(s.devices) {
		errs = append(errs, fmt.Errorf("site %s: %d devices (%d removed), want %d live", s.cfg.Site, devices, removed, len(s.devices)))
	}
	mismatch, err := s.currentMismatches(ctx, pool)
	if err != nil {
		return err
	}
	if mismatch > 0 {
		errs = append(errs, fmt.Errorf("site %s: %d current conditions differ from the last sent", s.cfg.Site, mismatch))
	}
	return errors.Join(errs...)
}

// hubHistory reads the site's condition_history rows per device/type, in
// order.
func (s *Sat) hubHistory(ctx context.Context, pool *pgxpool.Pool) (map[string][]Change, error) {
	rows, err := pool.Query(ctx, `
		SELECT h.device_id::text, h.type, h.status, h.reason, h.message
		FROM condition_history h JOIN devices d ON d.id = h.device_id
		WHERE d.site = $1 ORDER BY h.id`, s.cfg.Site)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[string][]Change{}
	for rows.Next() {
		var dev, typ string
		var c Change
		if err := rows.Scan(&dev, &typ, &c.Status, &c.Reason, &c.Message); err != nil {
			return nil, err
		}
		got[key(dev, typ)] = append(got[key(dev, typ)], c)
	}
	return got, rows.Err()
}

// compareHistory compares the hub's history with the changes sent: the
// first five differing device/type histories in detail, then a count, and
// any history of something never sent.
func (s *Sat) compareHistory(got map[string][]Change) []error {
	var errs []error
	bad := 0
	for k, want := range s.history {
		g := got[k]
		if !slices.Equal(g, want) {
			bad++
			if bad <= 5 {
				errs = append(errs, fmt.Errorf("site %s %s: history has %d rows, sent %d changes (first difference: %s)", s.cfg.Site, k, len(g), len(want), firstDiff(g, want)))
			}
		}
	}
	for k := range got {
		if _, ok := s.history[k]; !ok {
			errs = append(errs, fmt.Errorf("site %s: history rows for %s that was never sent", s.cfg.Site, k))
		}
	}
	if bad > 5 {
		errs = append(errs, fmt.Errorf("site %s: %d (device, type) histories differ in all", s.cfg.Site, bad))
	}
	return errs
}

// currentMismatches counts the hub's current conditions whose message is
// not the last one sent.
func (s *Sat) currentMismatches(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	rows, err := pool.Query(ctx, `SELECT c.device_id::text, c.type, c.status, c.message FROM device_conditions c
		JOIN devices d ON d.id = c.device_id WHERE d.site = $1`, s.cfg.Site)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	mismatch := 0
	for rows.Next() {
		var dev, typ, st, msg string
		if err := rows.Scan(&dev, &typ, &st, &msg); err != nil {
			return 0, err
		}
		want := s.current[dev][typ]
		if want == nil || want.GetMessage() != msg {
			mismatch++
		}
	}
	return mismatch, nil
}

func firstDiff(got, want []Change) string {
	for i := range max(len(got), len(want)) {
		var g, w any = "nothing", "nothing"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("row %d: hub %v, sent %v", i, g, w)
		}
	}
	return "none"
}
