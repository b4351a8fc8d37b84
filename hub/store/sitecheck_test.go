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

// TestResultNamingAnotherDeviceChangesNothing: a site's result for its own
// command that names another site's device (or another device of its own
// site) is refused and writes nothing: neither device's last_command_error
// nor applied_generation, nor the command.
func TestResultNamingAnotherDeviceChangesNothing(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	now := time.Now().UTC()
	devA, devA2, devB := uuid.NewString(), uuid.NewString(), uuid.NewString()
	sa, sb := open(t, s, "site-a"), open(t, s, "site-b")
	if _, err := s.ApplyBatch(ctx, "site-a", sa.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: devA, Conditions: conds(now, nil), ObservedTime: now}, {DeviceID: devA2, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyBatch(ctx, "site-b", sb.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: devB, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	cmd, err := s.SetDesiredImpairment(ctx, devA, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetDesiredImpairment(ctx, devB, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api"); err != nil {
		t.Fatal(err)
	}
	before := pgtest.Checksums(t, url)
	tests := []struct {
		name    string
		device  string
		success bool
		want    error
	}{
		{"another site's device, failure", devB, false, store.ErrWrongSite},
		{"another site's device, success", devB, true, store.ErrWrongSite},
		{"another device of the site", devA2, false, store.ErrMismatch},
		{"an unknown device", uuid.NewString(), true, store.ErrMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: cmd.ID, DeviceID: tc.device,
				Generation: cmd.Generation, Success: tc.success, Error: "written by site-a"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if changed := pgtest.ChangedTables(before, pgtest.Checksums(t, url)); len(changed) > 0 {
				t.Fatalf("refused result changed tables %v", changed)
			}
		})
	}
	// The genuine result still goes through.
	if ignored, err := s.RecordResult(ctx, "site-a", store.CommandResult{CommandID: cmd.ID, DeviceID: devA,
		Generation: cmd.Generation, Success: false, Error: "placement 503"}); err != nil || ignored {
		t.Fatalf("genuine result: ignored=%v err=%v", ignored, err)
	}
	if d, _ := s.GetDevice(ctx, devA); d.LastCommandError != "placement 503" {
		t.Fatalf("genuine result not recorded: %+v", d)
	}
}

// TestDriftCorrectionOfAnotherGenerationIgnored: only a correction that
// re-applies the device's current desired generation is recorded.
func TestDriftCorrectionOfAnotherGenerationIgnored(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	now := time.Now().UTC()
	dev, untouched := uuid.NewString(), uuid.NewString()
	sa := open(t, s, "site-a")
	if _, err := s.ApplyBatch(ctx, "site-a", sa.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: dev, Conditions: conds(now, nil), ObservedTime: now}, {DeviceID: untouched, Conditions: conds(now, nil), ObservedTime: now}}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.SetDesiredImpairment(ctx, dev, store.ImpairmentQuarantined, "op", "bad GPU", "operator-api"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		device     string
		generation int64
	}{
		{"stale generation", dev, 1},
		{"future generation", dev, 3},
		{"device without a desired state", untouched, 0},
		{"device without a desired state, generation 1", untouched, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ignored, err := s.RecordDriftCorrection(ctx, "site-a", tc.device, tc.generation, "trait re-removed", now)
			if err != nil || !ignored {
				t.Fatalf("ignored=%v err=%v, want ignored", ignored, err)
			}
			if n := pgtest.Count(t, url, `SELECT count(*) FROM drift_corrections`); n != 0 {
				t.Fatalf("%d drift corrections written", n)
			}
			if n := pgtest.Count(t, url, `SELECT count(*) FROM devices WHERE drift_corrections > 0`); n != 0 {
				t.Fatalf("%d devices count a correction", n)
			}
		})
	}
	if ignored, err := s.RecordDriftCorrection(ctx, "site-b", dev, 2, "x", now); !errors.Is(err, store.ErrWrongSite) || ignored {
		t.Fatalf("other site: ignored=%v err=%v", ignored, err)
	}
	if ignored, err := s.RecordDriftCorrection(ctx, "site-a", dev, 2, "trait re-removed", now); err != nil || ignored {
		t.Fatalf("current generation: ignored=%v err=%v", ignored, err)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM drift_corrections`); n != 1 {
		t.Fatalf("%d drift corrections, want 1", n)
	}
}
