package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestLabelsSimulator runs a hub with --labels-file and a satellite with
// --label-map on the simulator: a node's extra.rack and resource class
// reach GetDevice as labels with the file's switch over them, ListDevices
// selects by them, a change of the node's extra in Ironic moves the
// device to its new rack, and rewriting the labels file under the running
// hub changes the device's labels without a restart.
func TestLabelsSimulator(t *testing.T) {
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{"lab"}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead}})
	file := filepath.Join(t.TempDir(), "labels.yaml")
	if err := os.WriteFile(file, []byte("labels:\n  - {site: lab, name: 'gpu-*', labels: {switch: s3}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hubAddr, _ := startHub(t, db, id, "--labels-file", file)
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	n := sim.AddNode(openstacksim.Node{Name: "gpu-001", ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100",
		Traits: []string{readyTrait}, Extra: map[string]any{"rack": "r12", "note": "Rack 12 (left)"}})
	other := sim.AddNode(openstacksim.Node{Name: "cpu-001", ProvisionState: "available", PowerState: "power off", ResourceClass: "cpu",
		Traits: []string{readyTrait}, Extra: map[string]any{"rack": "r7"}})
	clouds := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := sim.WriteCloudsYAML(clouds, "sim"); err != nil {
		t.Fatal(err)
	}
	harness.Start(t, "ironlink-satellite lab", bins.Satellite(), append([]string{"--site", "lab", "--hub", hubAddr, "--clouds-yaml", clouds,
		"--cloud", "sim", "--poll-interval", "1s", "--max-backoff", "2s", "--auth-backoff", "1s",
		"--label-map", "rack=extra.rack,class=resource_class,note=extra.note"}, id.satelliteArgs("lab")...)...)
	admin := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))

	waitLabels := func(dev string, want map[string]string) {
		t.Helper()
		harness.Eventually(t, 60*time.Second, func() error {
			r, err := admin.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: dev})
			if err != nil {
				return err
			}
			if got := r.GetDevice().GetLabels(); !maps.Equal(got, want) {
				return fmt.Errorf("labels %v, want %v", got, want)
			}
			return nil
		})
	}
	// note's value has spaces: left out, not refused.
	waitLabels(n.UUID, map[string]string{"rack": "r12", "class": "gpu-h100", "switch": "s3"})
	waitLabels(other.UUID, map[string]string{"rack": "r7", "class": "cpu"})
	list, err := admin.ListDevices(context.Background(), &ironlinkv1.ListDevicesRequest{Site: "lab", Labels: map[string]string{"rack": "r7"}})
	if err != nil || len(list.GetDevices()) != 1 || list.GetDevices()[0].GetDeviceId() != other.UUID {
		t.Fatalf("ListDevices rack=r7: %v %v", list, err)
	}

	if err := sim.UpdateNode(n.UUID, func(x *openstacksim.Node) { x.Extra = map[string]any{"rack": "r13"} }); err != nil {
		t.Fatal(err)
	}
	waitLabels(n.UUID, map[string]string{"rack": "r13", "class": "gpu-h100", "switch": "s3"})

	// The file rewritten in place (no SIGHUP): the running hub reloads it
	// and GetDevice shows the new switch; the file's power key reaches
	// cpu-001 by name, and ListDevices selects by it.
	if err := os.WriteFile(file, []byte("labels:\n  - {site: lab, name: 'gpu-*', labels: {switch: s4}}\n  - {site: lab, name: cpu-001, labels: {power: feed-b}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitLabels(n.UUID, map[string]string{"rack": "r13", "class": "gpu-h100", "switch": "s4"})
	waitLabels(other.UUID, map[string]string{"rack": "r7", "class": "cpu", "power": "feed-b"})
	list, err = admin.ListDevices(context.Background(), &ironlinkv1.ListDevicesRequest{Site: "lab", Labels: map[string]string{"switch": "s3"}})
	if err != nil || len(list.GetDevices()) != 0 {
		t.Fatalf("ListDevices switch=s3 after the file dropped it: %v %v", list, err)
	}
}
