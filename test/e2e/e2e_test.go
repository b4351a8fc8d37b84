// Package e2e runs real ironlink-hub and ironlink-satellite processes against
// an OpenStack cloud and a real PostgreSQL, and checks what an operator sees
// through the FleetService API. The same suite runs against the built-in
// simulator (always) and against a real cloud (IRONLINK_E2E_CLOUDS_YAML and
// IRONLINK_E2E_CLOUD; required when IRONLINK_E2E_REQUIRE_REAL=1, as in CI).
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/satellite/accessrules"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/test/harness"
)

const readyTrait = "CUSTOM_CUSTOMER_READY"

// cloud is the OpenStack the suite runs against, with admin clients the test
// uses to look behind ironlink's back and to change the fleet.
type cloud struct {
	cloudsYAML, name string
	bm, pl           *gophercloud.ServiceClient
	cp               *gophercloud.ServiceClient // nil without Nova
	sim              *openstacksim.Cloud        // nil for a real cloud
}

func simCloud(t *testing.T) *cloud {
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.SeedLikeTestbed(20)
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := sim.WriteCloudsYAML(path, "sim"); err != nil {
		t.Fatal(err)
	}
	c := connectCloud(t, path, "sim")
	c.sim = sim
	return c
}

func realCloud(t *testing.T) *cloud {
	path, name := os.Getenv("IRONLINK_E2E_CLOUDS_YAML"), os.Getenv("IRONLINK_E2E_CLOUD")
	if path == "" || name == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but IRONLINK_E2E_CLOUDS_YAML / IRONLINK_E2E_CLOUD are not set: no real cloud to test against")
		}
		t.Skip("no real cloud: set IRONLINK_E2E_CLOUDS_YAML and IRONLINK_E2E_CLOUD (see docs/howto/test-against-openstack.md) to run this suite against one")
	}
	c := connectCloud(t, path, name)
	// Placement is required by connectCloud; a cloud without Nova runs the
	// suite as a standalone site, unless the run must be real.
	if c.cp == nil && ostest.ServiceRequired("Nova") {
		ostest.MissingService(t, "Nova", "orphan detection, the site's OrphanDetection condition and NOVA_CREATE are tested with it")
	}
	return c
}

func connectCloud(t *testing.T, path, name string) *cloud {
	t.Helper()
	ctx := context.Background()
	ao, eo, _, err := clouds.Parse(clouds.WithCloudName(name), clouds.WithLocations(path))
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	ao.AllowReauth = true
	pc, err := openstack.AuthenticatedClient(ctx, ao)
	if err != nil {
		t.Fatalf("authenticate to cloud %s: %v", name, err)
	}
	bm, err := openstack.NewBareMetalV1(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	bm.Microversion = "1.65"
	pl, err := openstack.NewPlacementV1(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	pl.Microversion = "1.39"
	c := &cloud{cloudsYAML: path, name: name, bm: bm, pl: pl}
	if cp, err := openstack.NewComputeV2(pc, eo); err == nil {
		c.cp = cp
	}
	return c
}

// serverProjects maps every live Nova server id to its project (empty
// without Nova).
func (c *cloud) serverProjects(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	if c.cp == nil {
		return out
	}
	pages, err := servers.List(c.cp, servers.ListOpts{AllTenants: true}).AllPages(context.Background())
	if err != nil {
		t.Fatalf("list servers: %v", err)
	}
	ss, err := servers.ExtractServers(pages)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Status != "DELETED" && s.Status != "SOFT_DELETED" {
			out[s.ID] = s.TenantID
		}
	}
	return out
}

func TestEndToEndSimulator(t *testing.T) {
	c := simCloud(t)
	runSuite(t, c, 2*time.Second)
	t.Run("every OpenStack request the satellite made is allowed by the access rules", func(t *testing.T) {
		b, err := os.ReadFile("../../deploy/openstack/access-rules.yaml")
		if err != nil {
			t.Fatal(err)
		}
		rules, err := accessrules.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range c.sim.Requests() {
			if !strings.HasPrefix(r.UserAgent, "ironlink-satellite") || r.Service == openstacksim.ServiceIdentity {
				continue // the test's own admin calls, and Keystone token requests
			}
			n++
			path := r.Path
			if path == "" {
				path = "/"
			}
			if !accessrules.AnyAllows(rules, r.Service, r.Method, path) {
				t.Errorf("the satellite made %s %s %s, which deploy/openstack/access-rules.yaml does not allow", r.Service, r.Method, path)
			}
		}
		if n == 0 {
			t.Fatal("no satellite request was recorded: is the User-Agent still ironlink-satellite?")
		}
	})
}

func TestEndToEndRealCloud(t *testing.T) { runSuite(t, realCloud(t), 3*time.Second) }

var failureStates = []string{"deploy failed", "clean failed", "inspect failed", "rescue failed", "unrescue failed", "adopt failed", "service failed", "error"}

// expectedStatus is the test's own oracle for SPEC's status rules, from what
// Ironic and Placement say directly (no internal projects configured, no pool).
// expectedStatus is the status SPEC's rules give a seeded node; projects
// are the Nova servers' projects (every project is a customer here: the
// satellite runs without --internal-projects).
func expectedStatus(n nodes.Node, rpTraits []string, projects map[string]string) ironlinkv1.OperationalStatus {
	switch {
	case n.ProvisionState == "enroll" || n.ProvisionState == "verifying":
		return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ONBOARDING
	case slices.Contains(failureStates, n.ProvisionState):
		return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED
	case n.Maintenance:
		return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_MAINTENANCE
	case n.InstanceUUID != "" && projects[n.InstanceUUID] != "":
		return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_IN_SERVICE
	case n.InstanceUUID != "":
		return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ALLOCATED
	case slices.Contains(rpTraits, readyTrait):
		return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE
	}
	return ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_HELD
}

func (c *cloud) nodes(t *testing.T) []nodes.Node {
	t.Helper()
	pages, err := nodes.List(c.bm, nodes.ListOpts{Fields: []string{"uuid", "name", "provision_state", "maintenance", "instance_uuid"}, Limit: 1000}).AllPages(context.Background())
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	ns, err := nodes.ExtractNodes(pages)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func (c *cloud) rpTraits(t *testing.T, id string) []string {
	t.Helper()
	tr, err := resourceproviders.GetTraits(context.Background(), c.pl, id).Extract()
	if err != nil {
		if gophercloud.ResponseCodeIs(err, 404) {
			return nil
		}
		t.Fatalf("provider %s traits: %v", id, err)
	}
	return tr.Traits
}

func (c *cloud) nodeTraits(t *testing.T, id string) []string {
	t.Helper()
	var body struct {
		Traits []string `json:"traits"`
	}
	_, err := c.bm.Get(context.Background(), c.bm.ServiceURL("nodes", id, "traits"), &body, nil)
	if err != nil {
		t.Fatalf("node %s traits: %v", id, err)
	}
	return body.Traits
}

func getDevice(t *testing.T, fc ironlinkv1.FleetServiceClient, id string) *ironlinkv1.GetDeviceResponse {
	t.Helper()
	r, err := fc.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatalf("GetDevice %s: %v", id, err)
	}
	return r
}

func conditionOf(d *ironlinkv1.Device, typ string) *ironlinkv1.Condition {
	for _, c := range d.GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

func waitCommand(t *testing.T, fc ironlinkv1.FleetServiceClient, id string, want ironlinkv1.CommandState) *ironlinkv1.OperatorCommand {
	t.Helper()
	var cmd *ironlinkv1.OperatorCommand
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := fc.GetCommand(context.Background(), &ironlinkv1.GetCommandRequest{CommandId: id})
		if err != nil {
			return err
		}
		cmd = r.GetCommand()
		if cmd.GetState() != want {
			return fmt.Errorf("command %s is %v (error %q), want %v", id, cmd.GetState(), cmd.GetLastError(), want)
		}
		return nil
	})
	return cmd
}

func runSuite(t *testing.T, c *cloud, poll time.Duration) {
	ctx := context.Background()
	db := pgtest.NewDatabase(t)
	const site = "e2e"
	id := newIdentity(t, []string{site, "other"}, map[string][]string{
		"ops-admin":  {auth.ScopeOperationsRead, auth.ScopeOperationsWrite},
		"ops-viewer": {auth.ScopeOperationsRead},
	})
	hubAddr, _ := startHub(t, db, id)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", c.cloudsYAML,
		"--cloud", c.name, "--poll-interval", poll.String(), "--max-backoff", "2s", "--resync-interval", "3s", "--sweep-interval", "2s", "--auth-backoff", "1s", "--log-level", "debug"}, id.satelliteArgs(site)...)...)
	fc := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))

	initial := c.nodes(t)
	if len(initial) == 0 {
		t.Fatal("the cloud has no Ironic nodes; seed some first (the test bed's seed-nodes)")
	}
	expected := map[string]ironlinkv1.OperationalStatus{}
	projects := c.serverProjects(t)
	for _, n := range initial {
		expected[n.UUID] = expectedStatus(n, c.rpTraits(t, n.UUID), projects)
	}
	pick := func(want ironlinkv1.OperationalStatus, not ...string) string {
		for _, n := range initial {
			if expected[n.UUID] == want && !slices.Contains(not, n.UUID) {
				return n.UUID
			}
		}
		t.Fatalf("no seeded node is expected to be %v", want)
		return ""
	}

	t.Run("every node appears with the right conditions and status", func(t *testing.T) {
		harness.Eventually(t, 60*time.Second, func() error {
			var got []*ironlinkv1.Device
			tok := ""
			for {
				r, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 7, PageToken: tok})
				if err != nil {
					return err
				}
				got = append(got, r.GetDevices()...)
				if tok = r.GetNextPageToken(); tok == "" {
					break
				}
			}
			if len(got) != len(initial) {
				return fmt.Errorf("hub lists %d devices, Ironic has %d", len(got), len(initial))
			}
			for _, d := range got {
				if want := expected[d.GetDeviceId()]; d.GetStatus() != want {
					return fmt.Errorf("device %s (%s, %s): status %v (%s), want %v", d.GetDeviceId(), d.GetName(),
						d.GetFacts().GetProvisionState(), d.GetStatus(), d.GetStatusReason(), want)
				}
			}
			return nil
		})
		checks := []struct {
			status ironlinkv1.OperationalStatus
			cond   string
			reason []string
		}{
			{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED, "ProvisioningHealthy", []string{"CleanFailed", "DeployFailed", "TeardownFailed"}},
			{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_MAINTENANCE, "MaintenanceClear", []string{"Manual", "PowerFailure", "CleanFailure"}},
			{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ONBOARDING, "Enrolled", []string{"NotVerified", "Verifying"}},
		}
		for _, ch := range checks {
			d := getDevice(t, fc, pick(ch.status)).GetDevice()
			if len(d.GetConditions()) != 7 {
				t.Errorf("device %s has %d conditions, want 7", d.GetDeviceId(), len(d.GetConditions()))
			}
			cond := conditionOf(d, ch.cond)
			if cond.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE || !slices.Contains(ch.reason, cond.GetReason()) {
				t.Errorf("%v device %s: %s = %v/%s, want False with one of %v", ch.status, d.GetDeviceId(), ch.cond, cond.GetStatus(), cond.GetReason(), ch.reason)
			}
			if !strings.Contains(d.GetStatusReason(), ch.cond) {
				t.Errorf("status reason %q does not name %s", d.GetStatusReason(), ch.cond)
			}
		}
	})

	target := pick(ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE)
	t.Run("quarantine removes the trait from node and provider", func(t *testing.T) {
		start := time.Now()
		r, err := fc.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: target, Reason: "e2e: GPU 3 Xid 79"})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCommand().GetGeneration() < 1 || r.GetCommand().GetState() != ironlinkv1.CommandState_COMMAND_STATE_PENDING {
			t.Fatalf("command: %v", r.GetCommand())
		}
		var gone time.Duration
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if !slices.Contains(c.rpTraits(t, target), readyTrait) {
				gone = time.Since(start)
				break
			}
		}
		waitCommand(t, fc, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
		t.Logf("quarantine: API call → trait gone from Placement in %s, → command SUCCEEDED in %s",
			gone.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		if tr := c.rpTraits(t, target); slices.Contains(tr, readyTrait) {
			t.Errorf("provider still has %s: %v", readyTrait, tr)
		}
		if tr := c.nodeTraits(t, target); slices.Contains(tr, readyTrait) {
			t.Errorf("node still has %s: %v", readyTrait, tr)
		}
		harness.Eventually(t, 30*time.Second, func() error {
			d := getDevice(t, fc, target)
			cr := conditionOf(d.GetDevice(), "CustomerReady")
			if d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED ||
				cr.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE {
				return fmt.Errorf("status %v, CustomerReady %v/%s", d.GetDevice().GetStatus(), cr.GetStatus(), cr.GetReason())
			}
			if len(d.GetImpairmentHistory()) == 0 || d.GetImpairmentHistory()[0].GetReason() != "e2e: GPU 3 Xid 79" ||
				d.GetImpairmentHistory()[0].GetActor() != "ops-admin" {
				return fmt.Errorf("impairment history %v", d.GetImpairmentHistory())
			}
			return nil
		})
	})

	t.Run("release restores the trait on node and provider", func(t *testing.T) {
		r, err := fc.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: target, Reason: "e2e: GPU replaced"})
		if err != nil {
			t.Fatal(err)
		}
		cmd := waitCommand(t, fc, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
		if cmd.GetGeneration() != 2 {
			t.Errorf("release generation %d, want 2", cmd.GetGeneration())
		}
		if tr := c.rpTraits(t, target); !slices.Contains(tr, readyTrait) {
			t.Errorf("provider lacks %s: %v", readyTrait, tr)
		}
		if tr := c.nodeTraits(t, target); !slices.Contains(tr, readyTrait) {
			t.Errorf("node lacks %s: %v", readyTrait, tr)
		}
		harness.Eventually(t, 30*time.Second, func() error {
			d := getDevice(t, fc, target).GetDevice()
			if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE || d.GetAppliedGeneration() != 2 {
				return fmt.Errorf("status %v applied generation %d", d.GetStatus(), d.GetAppliedGeneration())
			}
			return nil
		})
	})

	t.Run("the resync puts back a trait removed from Placement behind ironlink's back", func(t *testing.T) {
		tr, err := resourceproviders.GetTraits(ctx, c.pl, target).Extract()
		if err != nil {
			t.Fatal(err)
		}
		kept := slices.DeleteFunc(slices.Clone(tr.Traits), func(s string) bool { return s == readyTrait })
		if _, err := resourceproviders.UpdateTraits(ctx, c.pl, target, resourceproviders.UpdateTraitsOpts{
			ResourceProviderGeneration: tr.ResourceProviderGeneration, Traits: kept}).Extract(); err != nil {
			t.Fatalf("remove the trait behind ironlink's back: %v", err)
		}
		removed := time.Now()
		harness.Eventually(t, 30*time.Second, func() error {
			d := getDevice(t, fc, target).GetDevice()
			if d.GetDriftCorrections() < 1 || !strings.Contains(d.GetLastDriftCorrection(), "provider") {
				return fmt.Errorf("drift corrections %d, last %q", d.GetDriftCorrections(), d.GetLastDriftCorrection())
			}
			if !slices.Contains(c.rpTraits(t, target), readyTrait) {
				return fmt.Errorf("provider still lacks %s", readyTrait)
			}
			return nil
		})
		t.Logf("resync restored the provider trait and reported it %s after it was removed (resync interval 3s)", time.Since(removed).Round(time.Millisecond))
	})

	t.Run("maintenance set in Ironic shows within one poll interval", func(t *testing.T) {
		id := pick(ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_HELD, target)
		if err := nodes.SetMaintenance(ctx, c.bm, id, nodes.MaintenanceOpts{Reason: "e2e: fan failure"}).ExtractErr(); err != nil {
			t.Fatalf("set maintenance: %v", err)
		}
		t.Cleanup(func() { _ = nodes.UnsetMaintenance(context.Background(), c.bm, id).ExtractErr() })
		set := time.Now()
		// One poll interval, plus the time one listing and one commit take.
		harness.Eventually(t, poll+3*time.Second, func() error {
			d := getDevice(t, fc, id).GetDevice()
			if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_MAINTENANCE {
				return fmt.Errorf("status %v", d.GetStatus())
			}
			if m := conditionOf(d, "MaintenanceClear"); m.GetMessage() != "e2e: fan failure" {
				return fmt.Errorf("MaintenanceClear message %q", m.GetMessage())
			}
			return nil
		})
		t.Logf("maintenance visible at the hub after %s (poll interval %s)", time.Since(set).Round(time.Millisecond), poll)
	})

	t.Run("a node deleted from Ironic shows as removed, not gone", func(t *testing.T) {
		name := "e2e-" + randHex(4)
		n, err := nodes.Create(ctx, c.bm, nodes.CreateOpts{Driver: "fake-hardware", Name: name, ResourceClass: "gpu-h100"}).Extract()
		if err != nil {
			t.Fatalf("create node: %v", err)
		}
		deleted := false
		t.Cleanup(func() {
			if !deleted {
				_ = nodes.Delete(context.Background(), c.bm, n.UUID).ExtractErr()
			}
		})
		harness.Eventually(t, 30*time.Second, func() error {
			r, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: n.UUID})
			if err != nil {
				return err
			}
			if r.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ONBOARDING || r.GetDevice().GetName() != name {
				return fmt.Errorf("new node: %v %q", r.GetDevice().GetStatus(), r.GetDevice().GetName())
			}
			return nil
		})
		if err := nodes.Delete(ctx, c.bm, n.UUID).ExtractErr(); err != nil {
			t.Fatalf("delete node: %v", err)
		}
		deleted = true
		harness.Eventually(t, 30*time.Second, func() error {
			d := getDevice(t, fc, n.UUID).GetDevice()
			if !d.GetRemoved() || d.GetRemoveTime() == nil {
				return fmt.Errorf("device removed=%v", d.GetRemoved())
			}
			return nil
		})
		list, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list.GetDevices() {
			if d.GetDeviceId() == n.UUID {
				t.Error("removed device still in the default listing")
			}
		}
		all, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 1000, IncludeRemoved: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.GetDevices()) != len(list.GetDevices())+1 {
			t.Errorf("include_removed lists %d, default %d; want exactly one more", len(all.GetDevices()), len(list.GetDevices()))
		}
	})

	t.Run("identity: bad callers are refused and change nothing", func(t *testing.T) {
		before, err := fc.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		viewer := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-viewer"))
		if _, err := viewer.ListSites(ctx, &ironlinkv1.ListSitesRequest{}); err != nil {
			t.Errorf("a reader cannot read: %v", err)
		}
		_, err = viewer.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: target, Reason: "not allowed"})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("operations:read calling QuarantineDevice: %v, want PermissionDenied", err)
		}
		anon := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, ""))
		_, err = anon.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: target, Reason: "no token"})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("no token: %v, want Unauthenticated", err)
		}
		// The satellite of another site may not speak for this one.
		other := ironlinkv1.NewLinkServiceClient(id.dialAs(t, hubAddr, auth.SatelliteClientID("other")))
		stream, err := other.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: site, BootId: "intruder"}}})
		if _, err := stream.Recv(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("hello for another site: %v, want PermissionDenied", err)
		}
		// An operator may not open a link at all.
		opLink, err := ironlinkv1.NewLinkServiceClient(id.dialAs(t, hubAddr, "ops-admin")).Connect(ctx)
		if err == nil {
			_ = opLink.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: site}}})
			_, err = opLink.Recv()
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("operator opening a link: %v, want PermissionDenied", err)
		}
		after, err := fc.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(after.GetCommands()) != len(before.GetCommands()) {
			t.Errorf("refused calls created commands: %d → %d", len(before.GetCommands()), len(after.GetCommands()))
		}
		sites, _ := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		for _, s := range sites.GetSites() {
			if s.GetName() == "other" {
				t.Errorf("a refused hello created site %q", s.GetName())
			}
		}
	})

	t.Run("a satellite removed from the roster loses its link, and gets it back when restored", func(t *testing.T) {
		linkState := func() ironlinkv1.LinkState {
			r, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range r.GetSites() {
				if s.GetName() == site {
					return s.GetLinkState()
				}
			}
			return ironlinkv1.LinkState_LINK_STATE_UNSPECIFIED
		}
		id.writeRoster(t, []string{auth.SatelliteClientID(site)})
		removed := time.Now()
		harness.Eventually(t, 20*time.Second, func() error {
			if st := linkState(); st == ironlinkv1.LinkState_LINK_STATE_CONNECTED {
				return fmt.Errorf("link still %v", st)
			}
			return nil
		})
		t.Logf("link closed %s after the roster lost the satellite", time.Since(removed).Round(time.Millisecond))
		id.writeRoster(t, nil)
		harness.Eventually(t, 30*time.Second, func() error {
			if st := linkState(); st != ironlinkv1.LinkState_LINK_STATE_CONNECTED {
				return fmt.Errorf("link %v", st)
			}
			return nil
		})
	})

	t.Run("an instance_uuid Nova does not know is an orphan at the operator API after two sweeps", func(t *testing.T) {
		if c.cp == nil {
			ostest.MissingService(t, "Nova", "orphan detection does not run (standalone site)")
		}
		// The last eligible node: available, no instance, not in maintenance.
		var id string
		for i := len(initial) - 1; i >= 0; i-- {
			n := initial[i]
			if n.ProvisionState == "available" && n.InstanceUUID == "" && !n.Maintenance && n.UUID != target {
				id = n.UUID
				break
			}
		}
		if id == "" {
			t.Fatal("no available node without an instance")
		}
		ghost := uuid()
		setInstance := func(v any) error {
			_, err := nodes.Update(context.Background(), c.bm, id, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_uuid", Value: v}}).Extract()
			return err
		}
		if err := setInstance(ghost); err != nil {
			t.Fatalf("set instance_uuid: %v", err)
		}
		cleared := false
		t.Cleanup(func() {
			if !cleared {
				_, _ = nodes.Update(context.Background(), c.bm, id, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/instance_uuid"}}).Extract()
			}
		})
		set := time.Now()
		var seen *ironlinkv1.Device
		harness.Eventually(t, 60*time.Second, func() error {
			r, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, InstanceMismatch: true})
			if err != nil {
				return err
			}
			for _, d := range r.GetDevices() {
				if d.GetDeviceId() == id {
					seen = d
					return nil
				}
			}
			return fmt.Errorf("%d devices with mismatches, not yet %s", len(r.GetDevices()), id)
		})
		t.Logf("orphan listed at the hub %s after instance_uuid was set (sweep every 2 s, two sweeps needed)", time.Since(set).Round(time.Millisecond))
		ms := seen.GetFacts().GetInstanceMismatches()
		if len(ms) != 1 || ms[0].GetKind() != ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN ||
			ms[0].GetIronicInstanceUuid() != ghost || ms[0].GetNovaServerId() != ghost {
			t.Fatalf("mismatches %v", ms)
		}
		d := getDevice(t, fc, id).GetDevice()
		if ia := conditionOf(d, "InstanceAllocated"); ia.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE ||
			ia.GetReason() != "InstanceRecordMismatch" || !strings.Contains(ia.GetMessage(), ghost) {
			t.Fatalf("InstanceAllocated %v", ia)
		}
		// Ironic holds the node, so it is not offered to customers.
		if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ALLOCATED {
			t.Errorf("status of the orphaned node %v (%s), want ALLOCATED", d.GetStatus(), d.GetStatusReason())
		}
		sites, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if n := sites.GetSites()[0].GetInstanceMismatchCount(); n < 1 {
			t.Errorf("ListSites counts %d devices with mismatches", n)
		}
		// Repaired by an operator: the verdict goes away.
		if err := func() error {
			_, err := nodes.Update(context.Background(), c.bm, id, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/instance_uuid"}}).Extract()
			return err
		}(); err != nil {
			t.Fatalf("clear instance_uuid: %v", err)
		}
		cleared = true
		harness.Eventually(t, 60*time.Second, func() error {
			d := getDevice(t, fc, id).GetDevice()
			if len(d.GetFacts().GetInstanceMismatches()) != 0 {
				return fmt.Errorf("still reported: %v", d.GetFacts().GetInstanceMismatches())
			}
			return nil
		})
	})

	t.Run("the site conditions reach the operator API", func(t *testing.T) {
		harness.Eventually(t, 30*time.Second, func() error {
			r, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
			if err != nil {
				return err
			}
			got := map[string]string{}
			for _, cd := range r.GetSites()[0].GetConditions() {
				got[cd.GetType()] = cd.GetStatus().String() + "/" + cd.GetReason()
			}
			wantDetection := "CONDITION_STATUS_TRUE/Enabled"
			if c.cp == nil {
				wantDetection = "CONDITION_STATUS_FALSE/Standalone"
			}
			if got["OpenStackAuthenticated"] != "CONDITION_STATUS_TRUE/Authenticated" || got["OrphanDetection"] != wantDetection {
				return fmt.Errorf("site conditions %v", got)
			}
			return nil
		})
	})

	if c.sim != nil {
		t.Run("a credential Keystone refuses is a site condition, and heals", func(t *testing.T) {
			c.sim.InjectFault(openstacksim.Fault{Service: "identity", Method: "POST", PathContains: "/auth/tokens", Status: 401, Times: -1})
			c.sim.ExpireTokens()
			issued := c.sim.TokensIssued()
			authState := func() (string, error) {
				r, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
				if err != nil {
					return "", err
				}
				for _, cd := range r.GetSites()[0].GetConditions() {
					if cd.GetType() == "OpenStackAuthenticated" {
						return cd.GetStatus().String() + "/" + cd.GetReason(), nil
					}
				}
				return "", errors.New("no OpenStackAuthenticated")
			}
			harness.Eventually(t, 30*time.Second, func() error {
				if s, err := authState(); err != nil || s != "CONDITION_STATUS_FALSE/AuthenticationFailed" {
					return fmt.Errorf("OpenStackAuthenticated %s %v", s, err)
				}
				return nil
			})
			c.sim.ClearFaults()
			harness.Eventually(t, 60*time.Second, func() error {
				if s, err := authState(); err != nil || s != "CONDITION_STATUS_TRUE/Authenticated" {
					return fmt.Errorf("OpenStackAuthenticated %s %v", s, err)
				}
				return nil
			})
			if n := c.sim.TokensIssued() - issued; n != 1 {
				t.Errorf("%d tokens issued on recovery, want 1", n)
			}
		})
	}

	t.Run("the site is listed as connected", func(t *testing.T) {
		r, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetSites()) != 1 || r.GetSites()[0].GetLinkState() != ironlinkv1.LinkState_LINK_STATE_CONNECTED ||
			r.GetSites()[0].GetDeviceCount() != int32(len(initial)) {
			t.Fatalf("sites: %v", r.GetSites())
		}
	})
}

func uuid() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
