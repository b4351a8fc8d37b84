package ctl_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// `ironlink op start inspect -l SELECTOR` starts one operation on every
// device a drift outlier group's selector matches (here the one gpu-h100
// machine with 7 GPUs among three), and only on those; -l with named
// devices, with enrol, or matching nothing is a usage error.
func TestOpStartBySelector(t *testing.T) {
	addr, st := opsHub(t)
	ctx := context.Background()
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b2", Replica: "r0", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var ups []store.DeviceUpdate
	ids := map[string]string{}
	for i, gpus := range []uint32{8, 7, 8} {
		name := fmt.Sprintf("gpu-%d", i)
		ids[name] = uuid.NewString()
		h, _ := protojson.Marshal(&ironlinkv1.HardwareState{CpuModel: "Xeon", CpuCount: 224, MemoryMib: 2 << 20, InventoryAvailable: true, InventoryStatus: "Read",
			PciDevices: []*ironlinkv1.HardwarePCIDevice{{VendorId: "10de", ProductId: "2330", Class: "030200", Count: gpus}}})
		ups = append(ups, store.DeviceUpdate{DeviceID: ids[name], ObservedTime: now,
			Facts:      &store.Facts{Name: name, ProvisionState: "manageable", ResourceClass: "gpu-h100"},
			Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}},
			Hardware:   &store.Hardware{JSON: h, ReadAt: now}})
	}
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, Devices: ups}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, PollInterval: 20 * time.Millisecond,
			Getenv: func(k string) string {
				if k == ctl.EnvConfig {
					return cfgPath
				}
				return ""
			}}, append([]string{"--hub", addr, "--plaintext", "--no-auth"}, args...))
		return out.String(), errb.String(), code
	}
	const sel = "site=site-a,class=gpu-h100,hw.gpu_count=7"
	out, errs, code := run("op", "start", "inspect", "-l", sel, "--reason", "7 GPUs: inspect again")
	if code != 0 {
		d, e, _ := run("drift", "--site", "site-a")
		t.Fatalf("op start inspect -l: exit %d\n%s%s\n%s%s", code, out, errs, d, e)
	}
	ops, err := st.ListOperations(ctx, store.OperationFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].DeviceID != ids["gpu-1"] || ops[0].Kind != "INSPECT" || ops[0].Reason != "7 GPUs: inspect again" {
		t.Fatalf("operations started by -l %s: %+v, want one INSPECT of gpu-1 (%s)\n%s", sel, ops, ids["gpu-1"], out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"op", "start", "inspect", "gpu-0", "-l", sel, "--reason", "x"}, "one or the other"},
		{[]string{"op", "start", "enrol", "--site", "site-a", "-l", sel, "--reason", "x"}, "not \"enrol\""},
		{[]string{"op", "start", "inspect", "-l", "site=site-a,class=gpu-h100,hw.gpu_count=6", "--reason", "x"}, "matches no device"},
	} {
		if _, errs, code := run(c.args...); code != ctl.ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d %q, want usage error with %q", c.args, code, errs, c.want)
		}
	}
}
