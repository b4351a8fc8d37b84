package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// A standalone-Ironic site (no Placement, no Nova in the catalog): the
// satellite detects it, conditions come from Ironic alone (CustomerReady
// from the node's traits), quarantine and release act on the node trait
// only, orphan detection is off and says why, and the satellite never asks
// for Placement or Nova.
func TestEndToEndStandaloneSimulator(t *testing.T) {
	ctx := context.Background()
	sim := openstacksim.New(openstacksim.Options{NoPlacement: true})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ready := sim.AddNode(openstacksim.Node{Name: "sa-ready", ProvisionState: "available", PowerState: "power off",
		ResourceClass: "gpu-h100", Traits: []string{readyTrait}})
	held := sim.AddNode(openstacksim.Node{Name: "sa-held", ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100"})
	leased := sim.AddNode(openstacksim.Node{Name: "sa-leased", ProvisionState: "active", PowerState: "power on",
		ResourceClass: "gpu-h100", InstanceUUID: uuid(), Lessee: "p-customer"})
	path := t.TempDir() + "/clouds.yaml"
	if err := sim.WriteCloudsYAML(path, "sa"); err != nil {
		t.Fatal(err)
	}

	const site = "standalone"
	id := newIdentity(t, []string{site}, map[string][]string{"ops": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	hubAddr, _ := startHub(t, pgtest.NewDatabase(t), id)
	// The satellite starts while Keystone refuses its credential: the hub
	// sees the site and why, with every site condition present.
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceIdentity, Method: "POST", PathContains: "/auth/tokens", Status: 401, Times: -1})
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", path,
		"--cloud", "sa", "--poll-interval", "1s", "--sweep-interval", "1s", "--max-backoff", "2s", "--auth-backoff", "1s",
		"--log-level", "debug"}, id.satelliteArgs(site)...)...)
	fc := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops"))
	siteConds := func() (map[string]string, error) {
		sites, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil {
			return nil, err
		}
		if len(sites.GetSites()) != 1 {
			return nil, fmt.Errorf("sites %v", sites.GetSites())
		}
		got := map[string]string{}
		for _, c := range sites.GetSites()[0].GetConditions() {
			got[c.GetType()] = strings.TrimPrefix(c.GetStatus().String(), "CONDITION_STATUS_") + "/" + c.GetReason()
		}
		return got, nil
	}
	harness.Eventually(t, 30*time.Second, func() error {
		got, err := siteConds()
		if err != nil {
			return err
		}
		if got["OpenStackAuthenticated"] != "FALSE/AuthenticationFailed" || got["OrphanDetection"] != "UNKNOWN/NotConnected" {
			return fmt.Errorf("site conditions while Keystone refuses at start: %v", got)
		}
		return nil
	})
	sim.ClearFaults()

	want := map[string]ironlinkv1.OperationalStatus{
		ready.UUID:  ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE,
		held.UUID:   ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_HELD,
		leased.UUID: ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_IN_SERVICE,
	}
	harness.Eventually(t, 30*time.Second, func() error {
		for dev, st := range want {
			r, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: dev})
			if err != nil {
				return err
			}
			if r.GetDevice().GetStatus() != st {
				return fmt.Errorf("%s: %v (%s), want %v", r.GetDevice().GetName(), r.GetDevice().GetStatus(), r.GetDevice().GetStatusReason(), st)
			}
		}
		return nil
	})
	if c := conditionOf(getDevice(t, fc, ready.UUID).GetDevice(), "CustomerReady"); !strings.Contains(c.GetMessage(), "Ironic node") {
		t.Errorf("CustomerReady on a standalone site should read the node's traits: %v", c)
	}

	r, err := fc.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: ready.UUID, Reason: "e2e standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitCommand(t, fc, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
	if n, _ := sim.Node(ready.UUID); slices.Contains(n.Traits, readyTrait) {
		t.Fatalf("node still has %s after quarantine: %v", readyTrait, n.Traits)
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if st := getDevice(t, fc, ready.UUID).GetDevice().GetStatus(); st != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	rel, err := fc.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: ready.UUID, Reason: "e2e standalone"})
	if err != nil {
		t.Fatal(err)
	}
	waitCommand(t, fc, rel.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
	if n, _ := sim.Node(ready.UUID); !slices.Contains(n.Traits, readyTrait) {
		t.Fatalf("node lacks %s after release: %v", readyTrait, n.Traits)
	}

	harness.Eventually(t, 30*time.Second, func() error {
		sites, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
		if err != nil {
			return err
		}
		s := sites.GetSites()[0]
		for _, c := range s.GetConditions() {
			if c.GetType() == "OrphanDetection" && c.GetStatus() == ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE && c.GetReason() == "Standalone" {
				if len(s.GetCapabilities()) != 0 {
					return fmt.Errorf("capabilities %v on a standalone site", s.GetCapabilities())
				}
				return nil
			}
		}
		return fmt.Errorf("site conditions %v", s.GetConditions())
	})

	for _, req := range sim.Requests() {
		if strings.HasPrefix(req.UserAgent, "ironlink-satellite") && req.Service != openstacksim.ServiceIdentity && req.Service != "baremetal" {
			t.Errorf("the satellite of a standalone site asked %s: %s %s", req.Service, req.Method, req.Path)
		}
	}
}
