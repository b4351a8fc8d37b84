package fleet_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/syncbuf"
)

// twoSites adds a device of site-b next to newStoreWithDevice's device of
// site-a, quarantines both (as an operator of every site) and returns the
// device ids and their commands.
func twoSites(t *testing.T, st *store.Store) (devB string, cmdA, cmdB store.Command, devA string) {
	t.Helper()
	ctx := context.Background()
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-b", Replica: "r"})
	if err != nil {
		t.Fatal(err)
	}
	devB = uuid.NewString()
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-b", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{
		DeviceID: devB, ObservedTime: now,
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}},
	}}}); err != nil {
		t.Fatal(err)
	}
	devs, _, err := st.ListDevices(ctx, store.DeviceFilter{Site: "site-a", Limit: 10})
	if err != nil || len(devs) != 1 {
		t.Fatalf("site-a devices %v %v", devs, err)
	}
	devA = devs[0].ID
	if cmdA, err = st.SetDesiredImpairment(ctx, devA, store.ImpairmentQuarantined, "ops-root", "a", "operator-api"); err != nil {
		t.Fatal(err)
	}
	if cmdB, err = st.SetDesiredImpairment(ctx, devB, store.ImpairmentQuarantined, "ops-root", "b", "operator-api"); err != nil {
		t.Fatal(err)
	}
	// Both fail permanently, so RetryCommand is possible on either.
	for _, c := range []store.Command{cmdA, cmdB} {
		if _, err := st.RecordResult(ctx, c.Site, store.CommandResult{CommandID: c.ID, DeviceID: c.DeviceID, Generation: c.Generation,
			Error: "node gone", FailureClass: store.FailurePermanent, FailureReason: "NodeNotFound"}); err != nil {
			t.Fatal(err)
		}
	}
	return devB, cmdA, cmdB, devA
}

// TestSiteBoundOperator: an operator whose roster entry lists site-a sees
// only site-a, and everything of site-b is PermissionDenied, writes
// nothing, and is logged.
func TestSiteBoundOperator(t *testing.T) {
	st, url, _, _ := newStoreWithDevice(t)
	devB, cmdA, cmdB, devA := twoSites(t, st)
	var logs syncbuf.Buffer
	srv := fleet.NewServer(st, func(context.Context) string { return "ops-a" }, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := authn.NewContext(context.Background(), auth.Identity{ClientID: "ops-a", Sites: []string{"site-a"},
		Scopes: []string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	rows := func() int {
		return pgtest.Count(t, url, `SELECT (SELECT count(*) FROM commands) + (SELECT count(*) FROM impairment_history) + (SELECT count(*) FROM status_history)`)
	}

	t.Run("reads are filtered to its sites", func(t *testing.T) {
		sites, err := srv.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil || len(sites.GetSites()) != 1 || sites.GetSites()[0].GetName() != "site-a" {
			t.Fatalf("ListSites: %v %v", sites.GetSites(), err)
		}
		devs, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{})
		if err != nil || len(devs.GetDevices()) != 1 || devs.GetDevices()[0].GetDeviceId() != devA {
			t.Fatalf("ListDevices: %v %v", devs.GetDevices(), err)
		}
		cmds, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{})
		if err != nil || len(cmds.GetCommands()) != 1 || cmds.GetCommands()[0].GetCommandId() != cmdA.ID {
			t.Fatalf("ListCommands: %v %v", cmds.GetCommands(), err)
		}
		if _, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: devA}); err != nil {
			t.Fatalf("GetDevice of its own site: %v", err)
		}
		if _, err := srv.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: cmdA.ID}); err != nil {
			t.Fatalf("GetCommand of its own site: %v", err)
		}
	})

	t.Run("another site's objects are PermissionDenied and change nothing", func(t *testing.T) {
		tests := []struct {
			name string
			call func() error
		}{
			{"GetDevice", func() error {
				_, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: devB})
				return err
			}},
			{"GetCommand", func() error {
				_, err := srv.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: cmdB.ID})
				return err
			}},
			{"ListDevices of the site", func() error {
				_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-b"})
				return err
			}},
			{"ListCommands of the site", func() error {
				_, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{Site: "site-b"})
				return err
			}},
			{"ListCommands of the device", func() error {
				_, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceId: devB})
				return err
			}},
			{"QuarantineDevice", func() error {
				_, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: devB, Reason: "not mine"})
				return err
			}},
			{"ReleaseDevice", func() error {
				_, err := srv.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: devB, Reason: "not mine"})
				return err
			}},
			{"RetryCommand", func() error {
				_, err := srv.RetryCommand(ctx, &ironlinkv1.RetryCommandRequest{CommandId: cmdB.ID})
				return err
			}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				before := rows()
				err := tc.call()
				if status.Code(err) != codes.PermissionDenied || grpcerr.Reason(err) != grpcerr.ReasonWrongSite {
					t.Fatalf("%v (reason %q), want PermissionDenied %s", err, grpcerr.Reason(err), grpcerr.ReasonWrongSite)
				}
				if strings.Contains(status.Convert(err).Message(), "site-b") && !strings.Contains(tc.name, "of the site") {
					t.Errorf("the reply names the other site: %q", status.Convert(err).Message())
				}
				if after := rows(); after != before {
					t.Fatalf("rows went from %d to %d", before, after)
				}
				if !strings.Contains(logs.String(), "permission denied: site not among the operator's sites") {
					t.Fatalf("refusal not logged:\n%s", logs.String())
				}
			})
		}
		if d, _ := st.GetDevice(context.Background(), devB); d.DesiredGeneration != 1 {
			t.Fatalf("site-b device generation %d, want 1 (untouched)", d.DesiredGeneration)
		}
		for _, want := range []string{"client_id=ops-a", "site=site-b", "object=\"device " + devB + "\"", "object=\"command " + cmdB.ID + "\""} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("audit log lacks %s:\n%s", want, logs.String())
			}
		}
	})

	t.Run("writes on its own site work", func(t *testing.T) {
		r, err := srv.RetryCommand(ctx, &ironlinkv1.RetryCommandRequest{CommandId: cmdA.ID, Reason: "node re-enrolled"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCommand().GetGeneration() != 2 || r.GetCommand().GetState() != ironlinkv1.CommandState_COMMAND_STATE_PENDING {
			t.Fatalf("retry %v", r.GetCommand())
		}
		if _, err := srv.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: devA, Reason: "fixed"}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRetryCommandAndFailureClassAtTheAPI: the class and reason are shown
// next to last_error, and RetryCommand answers each case with its code.
func TestRetryCommandAndFailureClassAtTheAPI(t *testing.T) {
	ctx := context.Background()
	st, url, _, log := newStoreWithDevice(t)
	_, cmdA, _, devA := twoSites(t, st)
	srv := fleet.NewServer(st, func(context.Context) string { return "ops-alice" }, log)

	g, err := srv.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: cmdA.ID})
	if err != nil {
		t.Fatal(err)
	}
	if c := g.GetCommand(); c.GetState() != ironlinkv1.CommandState_COMMAND_STATE_FAILED || c.GetLastError() != "node gone" ||
		c.GetFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT || c.GetFailureReason() != "NodeNotFound" {
		t.Fatalf("command %v", c)
	}
	d, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: devA})
	if err != nil {
		t.Fatal(err)
	}
	if dv := d.GetDevice(); dv.GetLastCommandError() != "node gone" || dv.GetLastCommandFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT ||
		dv.GetLastCommandFailureReason() != "NodeNotFound" {
		t.Fatalf("device %v", dv)
	}

	rows := func() int {
		return pgtest.Count(t, url, `SELECT (SELECT count(*) FROM commands) + (SELECT count(*) FROM impairment_history)`)
	}
	before := rows()
	for _, tc := range []struct {
		name string
		req  *ironlinkv1.RetryCommandRequest
		want codes.Code
	}{
		{"malformed id", &ironlinkv1.RetryCommandRequest{CommandId: "x"}, codes.InvalidArgument},
		{"unknown command", &ironlinkv1.RetryCommandRequest{CommandId: uuid.NewString()}, codes.NotFound},
		{"reason too long", &ironlinkv1.RetryCommandRequest{CommandId: cmdA.ID, Reason: strings.Repeat("x", 2000)}, codes.InvalidArgument},
		{"reason not UTF-8", &ironlinkv1.RetryCommandRequest{CommandId: cmdA.ID, Reason: "\xff"}, codes.InvalidArgument},
		{"reason with a NUL byte", &ironlinkv1.RetryCommandRequest{CommandId: cmdA.ID, Reason: "a\x00b"}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := srv.RetryCommand(ctx, tc.req); status.Code(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if rows() != before {
				t.Fatal("a refused retry wrote rows")
			}
		})
	}

	r, err := srv.RetryCommand(ctx, &ironlinkv1.RetryCommandRequest{CommandId: cmdA.ID, Reason: "node re-enrolled"})
	if err != nil {
		t.Fatal(err)
	}
	if c := r.GetCommand(); c.GetGeneration() != 2 || c.GetActor() != "ops-alice" || c.GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED ||
		c.GetFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_UNSPECIFIED || c.GetLastError() != "" {
		t.Fatalf("retry command %v", c)
	}
	d, _ = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: devA})
	if h := d.GetImpairmentHistory(); len(h) != 2 || h[0].GetActor() != "ops-alice" || h[0].GetReason() != "retry of command "+cmdA.ID+": node re-enrolled" {
		t.Fatalf("history %v", h)
	}
	// The original is superseded now, and the new one is not FAILED.
	for _, id := range []string{cmdA.ID, r.GetCommand().GetCommandId()} {
		if _, err := srv.RetryCommand(ctx, &ironlinkv1.RetryCommandRequest{CommandId: id}); status.Code(err) != codes.FailedPrecondition ||
			grpcerr.Reason(err) != grpcerr.ReasonNotRetryable {
			t.Fatalf("retry of %s: %v, want FailedPrecondition %s", id, err, grpcerr.ReasonNotRetryable)
		}
	}
}

// TestSiteBoundOperatorNamesOnlyItsSites: a device name used at another
// site is, for an operator bound to site-a, an unknown name — NotFound with
// no candidates or suggestions that would reveal the other site's devices —
// and a name used at both sites resolves to its own site's device.
func TestSiteBoundOperatorNamesOnlyItsSites(t *testing.T) {
	st, _, _, _ := newStoreWithDevice(t)
	ctx := context.Background()
	now := time.Now().UTC()
	seq := uint64(0)
	named := func(site, name string) string {
		seq++
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "r"})
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: seq, Devices: []store.DeviceUpdate{{
			DeviceID: id, ObservedTime: now, Facts: &store.Facts{Name: name},
			Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}},
		}}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	onlyB := named("site-b", "gpu-b-07")
	sharedA := named("site-a", "gpu-shared")
	sharedB := named("site-b", "gpu-shared")
	srv := fleet.NewServer(st, func(context.Context) string { return "ops-a" }, slog.New(slog.NewTextHandler(&syncbuf.Buffer{}, nil)))
	bound := authn.NewContext(ctx, auth.Identity{ClientID: "ops-a", Sites: []string{"site-a"}, Scopes: []string{auth.ScopeOperationsRead}})

	_, err := srv.GetDevice(bound, &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-b-07"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("another site's name: %v, want NotFound", err)
	}
	if msg := status.Convert(err).Message(); strings.Contains(msg, onlyB) || strings.Contains(msg, "site-b") || strings.Contains(msg, "did you mean") {
		t.Errorf("NotFound reveals site-b: %q", msg)
	}
	r, err := srv.GetDevice(bound, &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-shared"})
	if err != nil || r.GetDevice().GetDeviceId() != sharedA {
		t.Fatalf("shared name for a site-a operator: %v %v, want %s", r.GetDevice().GetDeviceId(), err, sharedA)
	}
	// Naming the other site outright is PermissionDenied, as a site filter
	// of ListDevices is (docs/reference/access.md "Operators bound to sites"), by
	// name or by id, for a read and for a quarantine, and nothing is written.
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"GetDevice name", func() error {
			_, err := srv.GetDevice(bound, &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-b-07", Site: "site-b"})
			return err
		}},
		{"GetDevice id", func() error {
			_, err := srv.GetDevice(bound, &ironlinkv1.GetDeviceRequest{DeviceId: onlyB, Site: "site-b"})
			return err
		}},
		// Its own site with another site's device id: the refusal must not
		// tell where the device is ("it is at site-b").
		{"GetDevice id with own site", func() error {
			_, err := srv.GetDevice(bound, &ironlinkv1.GetDeviceRequest{DeviceId: onlyB, Site: "site-a"})
			if strings.Contains(status.Convert(err).Message(), "site-b") {
				t.Errorf("refusal reveals site-b: %q", status.Convert(err).Message())
			}
			return err
		}},
		{"QuarantineDevice name", func() error {
			w := authn.NewContext(ctx, auth.Identity{ClientID: "ops-a", Sites: []string{"site-a"}, Scopes: []string{auth.ScopeOperationsWrite}})
			_, err := srv.QuarantineDevice(w, &ironlinkv1.QuarantineDeviceRequest{DeviceName: "gpu-b-07", Site: "site-b", Reason: "x"})
			return err
		}},
	} {
		err := c.call()
		if status.Code(err) != codes.PermissionDenied || grpcerr.Reason(err) != grpcerr.ReasonWrongSite {
			t.Errorf("%s: %v, want PermissionDenied %s", c.what, err, grpcerr.ReasonWrongSite)
		}
	}
	if d, err := st.GetDevice(ctx, onlyB); err != nil || d.DesiredImpairment != store.ImpairmentNone {
		t.Errorf("site-b device after refused quarantine: %+v %v", d.DesiredImpairment, err)
	}
	// An operator of every site gets the ambiguity, with both candidates.
	_, err = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-shared"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), sharedB) {
		t.Fatalf("shared name for every site: %v, want InvalidArgument naming %s", err, sharedB)
	}
}
