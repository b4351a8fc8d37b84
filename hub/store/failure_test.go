package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// addDevice reports one healthy device for the site of sess and returns its id.
func addDevice(t *testing.T, s *store.Store, site string, sess store.LinkSession, seq uint64) string {
	t.Helper()
	now := time.Now().UTC()
	id := uuid.NewString()
	if _, err := s.ApplyBatch(context.Background(), site, sess.Epoch, store.Batch{Sequence: seq, Devices: []store.DeviceUpdate{{
		DeviceID: id, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPermanentFailureIsNotResent: a PERMANENT failure stays out of
// DueCommands however long it waits, even at a link start; TRANSIENT and
// unclassified ones (older satellites) come back after their backoff.
func TestPermanentFailureIsNotResent(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		class  store.FailureClass
		reason string
		resent bool
	}{
		{"permanent", store.FailurePermanent, "NodeNotFound", false},
		{"transient", store.FailureTransient, "ServiceUnavailable", true},
		{"unclassified (a satellite older than the field)", store.FailureUnclassified, "", true},
		{"a class this hub does not know is unclassified", store.FailureClass("FATAL"), "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t)
			sess := open(t, s, "site-a")
			id := addDevice(t, s, "site-a", sess, 1)
			cmd, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.MarkSent(ctx, cmd.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: cmd.ID, DeviceID: id, Generation: cmd.Generation,
				Error: "ironic: node not found", FailureClass: tc.class, FailureReason: tc.reason}); err != nil {
				t.Fatal(err)
			}
			wantClass := tc.class
			if !wantClass.Valid() {
				wantClass = store.FailureUnclassified
			}
			got, _ := s.GetCommand(ctx, cmd.ID)
			if got.State != store.CommandFailed || got.FailureClass != wantClass || got.FailureReason != tc.reason {
				t.Fatalf("command %+v, want FAILED %q/%s", got, wantClass, tc.reason)
			}
			d, _ := s.GetDevice(ctx, id)
			if d.LastCommandError != "ironic: node not found" || d.LastCommandFailureClass != wantClass || d.LastCommandFailureReason != tc.reason {
				t.Fatalf("device last command error %q %q/%s", d.LastCommandError, d.LastCommandFailureClass, d.LastCommandFailureReason)
			}
			policy := store.DeliveryPolicy{ResendAfter: time.Hour, FailureBackoff: time.Millisecond, MaxFailureBackoff: time.Millisecond}
			time.Sleep(20 * time.Millisecond) // past the 1 ms backoff
			for _, resend := range []bool{false, true} {
				due, err := s.DueCommands(ctx, "site-a", sess.Epoch, policy, resend, 10)
				if err != nil {
					t.Fatal(err)
				}
				if (len(due) == 1) != tc.resent {
					t.Fatalf("resend=%v: due %+v, want resent=%v", resend, due, tc.resent)
				}
			}
		})
	}
}

// TestSuccessClearsFailureClass: a later success of the same generation
// clears the class on the command and the device.
func TestSuccessClearsFailureClass(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-a")
	id := addDevice(t, s, "site-a", sess, 1)
	cmd, _ := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api")
	res := store.CommandResult{CommandID: cmd.ID, DeviceID: id, Generation: cmd.Generation, Error: "403", FailureClass: store.FailurePermanent, FailureReason: "AccessDenied"}
	if _, err := s.RecordResult(ctx, "site-a", res); err != nil {
		t.Fatal(err)
	}
	res.Success, res.Error = true, ""
	if _, err := s.RecordResult(ctx, "site-a", res); err != nil {
		t.Fatal(err)
	}
	c, _ := s.GetCommand(ctx, cmd.ID)
	d, _ := s.GetDevice(ctx, id)
	if c.State != store.CommandSucceeded || c.FailureClass != "" || c.FailureReason != "" || d.LastCommandFailureClass != "" || d.LastCommandFailureReason != "" {
		t.Fatalf("after success: command %+v device class %q/%q", c, d.LastCommandFailureClass, d.LastCommandFailureReason)
	}
}

// TestRetryCommand: an operator's retry of a FAILED command re-issues its
// desired state as the next generation (history entry, PENDING, due at
// once); any other state is ErrNotRetryable and writes nothing.
func TestRetryCommand(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	id := addDevice(t, s, "site-a", sess, 1)
	rows := func() int {
		return pgtest.Count(t, url, `SELECT (SELECT count(*) FROM commands) + (SELECT count(*) FROM impairment_history)`)
	}

	if _, err := s.RetryCommand(ctx, uuid.NewString(), "op", "x", "operator-api"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown command: %v, want ErrNotFound", err)
	}
	q, _ := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api")
	before := rows()
	if _, err := s.RetryCommand(ctx, q.ID, "op", "x", "operator-api"); !errors.Is(err, store.ErrNotRetryable) {
		t.Fatalf("PENDING command: %v, want ErrNotRetryable", err)
	}
	_ = s.MarkSent(ctx, q.ID)
	if _, err := s.RetryCommand(ctx, q.ID, "op", "x", "operator-api"); !errors.Is(err, store.ErrNotRetryable) {
		t.Fatalf("SENT command: %v, want ErrNotRetryable", err)
	}
	if n := rows(); n != before {
		t.Fatalf("refused retries wrote %d rows", n-before)
	}
	if _, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: q.ID, DeviceID: id, Generation: 1,
		Error: "node gone", FailureClass: store.FailurePermanent, FailureReason: "NodeNotFound"}); err != nil {
		t.Fatal(err)
	}
	policy := store.DeliveryPolicy{ResendAfter: time.Hour, FailureBackoff: time.Hour, MaxFailureBackoff: time.Hour}
	if due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, true, 10); len(due) != 0 {
		t.Fatalf("permanent failure due: %+v", due)
	}

	r, err := s.RetryCommand(ctx, q.ID, "ops-bob", "retry of command "+q.ID+": node re-enrolled", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == q.ID || r.Generation != 2 || r.State != store.CommandPending || r.Desired != store.ImpairmentQuarantined || r.Actor != "ops-bob" {
		t.Fatalf("retry command %+v", r)
	}
	if old, _ := s.GetCommand(ctx, q.ID); old.State != store.CommandSuperseded {
		t.Fatalf("retried command is %s, want SUPERSEDED", old.State)
	}
	due, _ := s.DueCommands(ctx, "site-a", sess.Epoch, policy, false, 10)
	if len(due) != 1 || due[0].ID != r.ID {
		t.Fatalf("due after retry: %+v", due)
	}
	hist, _ := s.ImpairmentHistory(ctx, id, 10)
	if len(hist) != 2 || hist[0].Actor != "ops-bob" || hist[0].Generation != 2 || hist[0].CommandID != r.ID || hist[0].Desired != store.ImpairmentQuarantined {
		t.Fatalf("history %+v", hist)
	}
	// The superseded original and a succeeded command cannot be retried.
	if _, err := s.RetryCommand(ctx, q.ID, "op", "x", "operator-api"); !errors.Is(err, store.ErrNotRetryable) {
		t.Fatalf("SUPERSEDED command: %v, want ErrNotRetryable", err)
	}
	_, _ = s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: r.ID, DeviceID: id, Generation: 2, Success: true})
	if _, err := s.RetryCommand(ctx, r.ID, "op", "x", "operator-api"); !errors.Is(err, store.ErrNotRetryable) {
		t.Fatalf("SUCCEEDED command: %v, want ErrNotRetryable", err)
	}
}

// TestSiteAllowListsFilterListings: DeviceFilter.Sites and
// CommandFilter.Sites keep only the listed sites; nil keeps all, empty none.
func TestSiteAllowListsFilterListings(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a, b := open(t, s, "site-a"), open(t, s, "site-b")
	da, db := addDevice(t, s, "site-a", a, 1), addDevice(t, s, "site-b", b, 1)
	for _, id := range []string{da, db} {
		if _, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		sites []string
		want  map[string]bool
	}{
		{"nil: all sites", nil, map[string]bool{"site-a": true, "site-b": true}},
		{"one site", []string{"site-b"}, map[string]bool{"site-b": true}},
		{"a site without devices", []string{"site-c"}, map[string]bool{}},
		{"empty: none", []string{}, map[string]bool{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			devs, _, err := s.ListDevices(ctx, store.DeviceFilter{Sites: tc.sites, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, d := range devs {
				got[d.Site] = true
			}
			if len(got) != len(tc.want) || len(devs) != len(tc.want) {
				t.Fatalf("devices of sites %v, want %v", got, tc.want)
			}
			cmds, _, err := s.ListCommands(ctx, store.CommandFilter{Sites: tc.sites, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			got = map[string]bool{}
			for _, c := range cmds {
				got[c.Site] = true
			}
			if len(got) != len(tc.want) || len(cmds) != len(tc.want) {
				t.Fatalf("commands of sites %v, want %v", got, tc.want)
			}
		})
	}
	if site, err := s.DeviceSite(ctx, db); err != nil || site != "site-b" {
		t.Fatalf("DeviceSite = %q, %v", site, err)
	}
	if _, err := s.DeviceSite(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeviceSite of unknown device: %v", err)
	}
}

// TestFailureBackoffCountsFailuresNotSends: a command resent five times
// across link cuts and then failed once waits the first back-off step
// (FailureBackoff), not FailureBackoff·2⁵; each further failure doubles it.
func TestFailureBackoffCountsFailuresNotSends(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	sess := open(t, s, "site-a")
	id := addDevice(t, s, "site-a", sess, 1)
	cmd, err := s.SetDesiredImpairment(ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	for range 6 { // sent, then resent after five link cuts
		if err := s.MarkSent(ctx, cmd.ID); err != nil {
			t.Fatal(err)
		}
	}
	fail := func() {
		t.Helper()
		res := store.CommandResult{CommandID: cmd.ID, DeviceID: id, Generation: cmd.Generation, Error: "placement 503", FailureClass: store.FailureTransient}
		if _, err := s.RecordResult(ctx, "site-a", res); err != nil {
			t.Fatal(err)
		}
	}
	due := func(backoff time.Duration) bool {
		t.Helper()
		policy := store.DeliveryPolicy{ResendAfter: time.Hour, FailureBackoff: backoff, MaxFailureBackoff: time.Hour}
		got, err := s.DueCommands(ctx, "site-a", sess.Epoch, policy, false, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(got) == 1
	}
	fail()
	time.Sleep(300 * time.Millisecond)
	// One failure: the wait is FailureBackoff (200 ms, past), whatever the sends.
	if !due(200 * time.Millisecond) {
		t.Fatal("a command failed once after six sends is not due after its first back-off step: the sends were counted")
	}
	_ = s.MarkSent(ctx, cmd.ID)
	fail()
	time.Sleep(300 * time.Millisecond)
	// Two failures: the wait doubles to 400 ms, not yet over.
	if due(200 * time.Millisecond) {
		t.Fatal("a command failed twice is due after one back-off step: the wait did not double")
	}
	if got, _ := s.GetCommand(ctx, cmd.ID); got.Attempts != 7 {
		t.Fatalf("attempts = %d, want 7 (every send counts there)", got.Attempts)
	}
}
