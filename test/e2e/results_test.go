package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// startSimSite starts a simulator seeded with n nodes and a satellite for
// site against hubAddr; it returns the simulator and its seeded nodes.
func startSimSite(t *testing.T, id *identity, hubAddr, site string, n int) (*openstacksim.Cloud, []openstacksim.Node) {
	t.Helper()
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	seeded := sim.SeedLikeTestbed(n)
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := sim.WriteCloudsYAML(path, "sim"); err != nil {
		t.Fatal(err)
	}
	harness.Start(t, "ironlink-satellite "+site, bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", path,
		"--cloud", "sim", "--poll-interval", "1s", "--max-backoff", "2s", "--resync-interval", "3s", "--sweep-interval", "2s",
		"--auth-backoff", "1s", "--log-level", "debug"}, id.satelliteArgs(site)...)...)
	return sim, seeded
}

// TestTypedResultsAndSiteBoundOperatorsSimulator runs a hub with two sites
// (each its own simulator and satellite) and checks, as operators see it:
// a command for a node deleted from Ironic fails PERMANENT and is not sent
// again, RetryCommand sends it again; an operator bound to one site sees
// only that site and is refused the other's devices without anything
// written; a client's burst gets ResourceExhausted with RetryInfo while the
// links keep delivering commands.
func TestTypedResultsAndSiteBoundOperatorsSimulator(t *testing.T) {
	ctx := context.Background()
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{"perm", "other"}, map[string][]string{
		"ops-admin":  {auth.ScopeOperationsRead, auth.ScopeOperationsWrite},
		"ops-other":  {auth.ScopeOperationsRead, auth.ScopeOperationsWrite},
		"ops-script": {auth.ScopeOperationsRead},
	})
	// ops-other is bound to site "other" (keygen prints no sites: the
	// operator adds the line to the entry).
	id.entries["ops-other"] = strings.Replace(id.entries["ops-other"], "    scopes:", "    sites: [other]\n    scopes:", 1)
	id.writeRoster(t, nil)
	hubAddr, hub := startHub(t, db, id, "--command-failure-backoff", "1s", "--operator-rate", "50", "--operator-burst", "50")
	simPerm, permNodes := startSimSite(t, id, hubAddr, "perm", 6)
	_, otherNodes := startSimSite(t, id, hubAddr, "other", 6)
	admin := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))

	harness.Eventually(t, 60*time.Second, func() error {
		for site, n := range map[string]int{"perm": len(permNodes), "other": len(otherNodes)} {
			r, err := admin.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site})
			if err != nil {
				return err
			}
			if len(r.GetDevices()) != n {
				return fmt.Errorf("site %s: %d devices at the hub, %d seeded", site, len(r.GetDevices()), n)
			}
		}
		return nil
	})

	t.Run("a node deleted from Ironic fails PERMANENT, is not resent, and RetryCommand sends it again", func(t *testing.T) {
		node := permNodes[0]
		saved, _ := simPerm.Node(node.UUID)
		if err := simPerm.DeleteNode(node.UUID); err != nil {
			t.Fatal(err)
		}
		r, err := admin.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: node.UUID, Reason: "e2e: node pulled from the rack"})
		if err != nil {
			t.Fatal(err)
		}
		first := r.GetCommand().GetCommandId()
		cmd := waitCommand(t, admin, first, ironlinkv1.CommandState_COMMAND_STATE_FAILED)
		if cmd.GetFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT || cmd.GetFailureReason() != "NodeNotFound" || cmd.GetAttempts() != 1 {
			t.Fatalf("command %v, want FAILED PERMANENT/NodeNotFound after 1 attempt", cmd)
		}
		d := getDevice(t, admin, node.UUID).GetDevice()
		if d.GetLastCommandFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT || d.GetLastCommandFailureReason() != "NodeNotFound" ||
			!strings.Contains(d.GetLastCommandError(), "not found") {
			t.Fatalf("device last command error %q %v/%s", d.GetLastCommandError(), d.GetLastCommandFailureClass(), d.GetLastCommandFailureReason())
		}
		// The node comes back, and still nothing is sent until an operator
		// asks. The positive sign that the hub would have resent it by now:
		// a transiently failing command of another node of the site, failed
		// at the same time, goes out again after its 1 s and 2 s backoffs.
		simPerm.AddNode(saved)
		// A node of its own (ready, so its quarantine writes its provider's
		// trait), leaving the seeded ones to the other tests.
		extra := simPerm.AddNode(openstacksim.Node{Name: "perm-transient", ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu-h100", Traits: []string{readyTrait}})
		simPerm.AddProvider(extra.UUID, extra.UUID, []string{readyTrait})
		other := extra.UUID
		harness.Eventually(t, 30*time.Second, func() error {
			_, err := admin.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: other})
			return err
		})
		traits := "/resource_providers/" + other + "/traits"
		simPerm.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "PUT", PathContains: traits, Status: 409, Times: -1,
			Before: func() { _ = simPerm.BumpProviderGeneration(other) }})
		tr, err := admin.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: other, Reason: "e2e: a transient failure beside it"})
		if err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 60*time.Second, func() error {
			g, err := admin.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: tr.GetCommand().GetCommandId()})
			if err != nil {
				return err
			}
			if n := g.GetCommand().GetAttempts(); n < 3 {
				return fmt.Errorf("the transiently failing command has been sent %d times, want 3", n)
			}
			return nil
		})
		simPerm.ClearFaults()
		waitCommand(t, admin, tr.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
		g, err := admin.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: first})
		if err != nil {
			t.Fatal(err)
		}
		if g.GetCommand().GetState() != ironlinkv1.CommandState_COMMAND_STATE_FAILED || g.GetCommand().GetAttempts() != 1 {
			t.Fatalf("after a transient failure was resent twice: %v, want still FAILED after 1 attempt", g.GetCommand())
		}
		sent := 0
		for _, l := range hub.Lines(`msg="command sent"`) {
			if strings.Contains(l, "command_id="+first) {
				sent++
			}
		}
		if sent != 1 {
			t.Fatalf("hub sent the permanently failed command %d times, want 1", sent)
		}

		rr, err := admin.RetryCommand(ctx, &ironlinkv1.RetryCommandRequest{CommandId: first, Reason: "node is back"})
		if err != nil {
			t.Fatal(err)
		}
		retried := waitCommand(t, admin, rr.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
		if retried.GetGeneration() != cmd.GetGeneration()+1 || retried.GetActor() != "ops-admin" || retried.GetFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_UNSPECIFIED {
			t.Fatalf("retried command %v", retried)
		}
		if n, _ := simPerm.Node(node.UUID); slices.Contains(n.Traits, readyTrait) {
			t.Errorf("node still has %s after the retried quarantine", readyTrait)
		}
		if ts, _, _ := simPerm.ProviderTraits(node.UUID); slices.Contains(ts, readyTrait) {
			t.Errorf("provider still has %s after the retried quarantine: %v", readyTrait, ts)
		}
		h := getDevice(t, admin, node.UUID)
		if d := h.GetDevice(); d.GetLastCommandError() != "" || d.GetLastCommandFailureClass() != ironlinkv1.FailureClass_FAILURE_CLASS_UNSPECIFIED {
			t.Errorf("after the retry succeeded: last error %q class %v", d.GetLastCommandError(), d.GetLastCommandFailureClass())
		}
		if ih := h.GetImpairmentHistory(); len(ih) < 2 || ih[0].GetReason() != "retry of command "+first+": node is back" || ih[0].GetActor() != "ops-admin" {
			t.Errorf("quarantine history %v", ih)
		}
	})

	t.Run("an operator bound to one site sees only it and is refused the other's devices", func(t *testing.T) {
		other := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-other"))
		sites, err := other.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil || len(sites.GetSites()) != 1 || sites.GetSites()[0].GetName() != "other" {
			t.Fatalf("ListSites: %v %v", sites.GetSites(), err)
		}
		devs, err := other.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{PageSize: 1000})
		if err != nil || len(devs.GetDevices()) != len(otherNodes) {
			t.Fatalf("ListDevices: %d devices, %v; want the %d of site other", len(devs.GetDevices()), err, len(otherNodes))
		}
		for _, d := range devs.GetDevices() {
			if d.GetSite() != "other" {
				t.Errorf("device %s of site %s listed", d.GetDeviceId(), d.GetSite())
			}
		}
		before, err := admin.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		victim := permNodes[1].UUID
		if _, err := other.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: victim}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("GetDevice of site perm: %v, want PermissionDenied", err)
		}
		if _, err := other.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: victim, Reason: "not mine"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("QuarantineDevice of site perm: %v, want PermissionDenied", err)
		}
		if _, err := other.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "perm"}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("ListDevices of site perm: %v, want PermissionDenied", err)
		}
		after, err := admin.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.GetCommands()) != len(before.GetCommands()) {
			t.Errorf("a refused quarantine created commands: %d → %d", len(before.GetCommands()), len(after.GetCommands()))
		}
		if d := getDevice(t, admin, victim).GetDevice(); d.GetDesiredGeneration() != 0 {
			t.Errorf("the refused device has desired generation %d", d.GetDesiredGeneration())
		}
		if n := hub.Count("permission denied: site not among the operator's sites"); n < 3 {
			t.Errorf("hub logged %d refusals, want 3", n)
		}
		if !strings.Contains(hub.Output(), "client_id=ops-other") {
			t.Error("the refusals do not name the client")
		}
	})

	t.Run("a burst gets ResourceExhausted with RetryInfo while the links deliver commands", func(t *testing.T) {
		script := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-script"))
		var refused, passed atomic.Int64
		var retryMu sync.Mutex
		var retry time.Duration
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, err := script.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
					if err == nil {
						passed.Add(1)
						continue
					}
					st := status.Convert(err)
					if st.Code() != codes.ResourceExhausted {
						t.Errorf("burst call: %v, want ResourceExhausted", err)
						return
					}
					refused.Add(1)
					for _, d := range st.Details() {
						if ri, ok := d.(*errdetails.RetryInfo); ok {
							retryMu.Lock()
							retry = ri.GetRetryDelay().AsDuration()
							retryMu.Unlock()
						}
					}
				}
			}()
		}
		// While the script runs into its limit, a quarantine on site other
		// goes out on the link and is applied.
		harness.Eventually(t, 30*time.Second, func() error {
			if refused.Load() == 0 {
				return fmt.Errorf("no call refused yet (%d passed)", passed.Load())
			}
			return nil
		})
		target := otherNodes[0].UUID
		r, err := admin.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: target, Reason: "e2e: during a burst"})
		if err != nil {
			t.Fatal(err)
		}
		waitCommand(t, admin, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
		close(stop)
		wg.Wait()
		retryMu.Lock()
		defer retryMu.Unlock()
		if retry <= 0 || retry > time.Second {
			t.Errorf("RetryInfo delay %s, want within (0, 1s] at 50 calls/s", retry)
		}
		sites, err := admin.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sites.GetSites() {
			if s.GetLinkState() != ironlinkv1.LinkState_LINK_STATE_CONNECTED {
				t.Errorf("site %s link %v after the burst", s.GetName(), s.GetLinkState())
			}
		}
		t.Logf("burst: %d calls passed, %d refused (50/s, burst 50); the quarantine during it succeeded", passed.Load(), refused.Load())
	})
}
