package link

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
)

const (
	cmdA = "6e0c6f7e-1b7a-4c55-9f34-0f7e2d2b1a01"
	huge = 1 << 20
)

// TestEveryTextFieldIsChecked: a NUL, a control character or an
// over-long value in any text field of any link message is InvalidArgument
// naming that field (BadRequest detail), and the reply never echoes more
// than a short prefix of the input.
func TestEveryTextFieldIsChecked(t *testing.T) {
	big := strings.Repeat("x", huge)
	batch := func(mut func(*ironlinkv1.ConditionBatch)) func() error {
		return func() error {
			d := goodDevice(devA)
			d.Facts = &ironlinkv1.DeviceFacts{Name: "node-1", InstanceMismatches: []*ironlinkv1.InstanceMismatch{{
				Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN, NovaServerId: devA, FirstSeenTime: timestamppb.Now()}}}
			b := &ironlinkv1.ConditionBatch{Sequence: 1, Devices: []*ironlinkv1.DeviceUpdate{d}}
			mut(b)
			_, err := ToBatch(b)
			return err
		}
	}
	facts := func(b *ironlinkv1.ConditionBatch) *ironlinkv1.DeviceFacts { return b.Devices[0].Facts }
	hello := func(mut func(*ironlinkv1.Hello)) func() error {
		return func() error {
			h := &ironlinkv1.Hello{Site: "site-a", BootId: "b", Version: "v", Capabilities: []string{"nova"},
				AppliedGenerations: []*ironlinkv1.AppliedGeneration{{DeviceId: devA, Generation: 1}}}
			mut(h)
			_, err := checkHello(h)
			return err
		}
	}
	result := func(mut func(*ironlinkv1.CommandResult)) func() error {
		return func() error {
			r := &ironlinkv1.CommandResult{CommandId: cmdA, DeviceId: devA, Generation: 1}
			mut(r)
			_, err := ToResult(r)
			return err
		}
	}
	correction := func(mut func(*ironlinkv1.DriftCorrection)) func() error {
		return func() error {
			c := &ironlinkv1.DriftCorrection{DeviceId: devA, Generation: 1}
			mut(c)
			_, _, err := ToCorrection(c, time.Now())
			return err
		}
	}
	siteConds := func(mut func(*ironlinkv1.Condition)) func() error {
		return func() error {
			c := &ironlinkv1.Condition{Type: "OpenStackAuthenticated", Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE,
				Reason: "Authenticated", ObservedTime: timestamppb.Now()}
			mut(c)
			_, _, err := ToSiteConditions(&ironlinkv1.SiteConditions{Conditions: []*ironlinkv1.Condition{c}})
			return err
		}
	}
	tests := []struct {
		name  string
		call  func() error
		field string
	}{
		{"hello site huge", hello(func(h *ironlinkv1.Hello) { h.Site = big }), "hello.site"},
		{"hello boot_id NUL", hello(func(h *ironlinkv1.Hello) { h.BootId = "b\x00" }), "hello.boot_id"},
		{"hello version huge", hello(func(h *ironlinkv1.Hello) { h.Version = big }), "hello.version"},
		{"hello capability control char", hello(func(h *ironlinkv1.Hello) { h.Capabilities = []string{"nova", "pla\x1bcement"} }), "hello.capabilities[1]"},
		{"hello capability huge", hello(func(h *ironlinkv1.Hello) { h.Capabilities = []string{big} }), "hello.capabilities[0]"},
		{"hello applied device huge", hello(func(h *ironlinkv1.Hello) { h.AppliedGenerations[0].DeviceId = big }), "hello.applied_generations[0].device_id"},
		{"batch device id huge", batch(func(b *ironlinkv1.ConditionBatch) { b.Devices[0].DeviceId = big }), "batch.devices[0].device_id"},
		{"batch snapshot id NUL", batch(func(b *ironlinkv1.ConditionBatch) { b.Snapshot = &ironlinkv1.SnapshotPart{SnapshotId: "s\x00"} }), "batch.snapshot.snapshot_id"},
		{"condition message NUL", batch(func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Message = "a\x00b" }), "batch.devices[0].conditions[0].message"},
		{"condition message CR", batch(func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Message = "a\rb" }), "batch.devices[0].conditions[0].message"},
		{"condition type huge", batch(func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Type = big }), "batch.devices[0].conditions[0].type"},
		{"fact name NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).Name = "n\x00" }), "batch.devices[0].facts.name"},
		{"fact provision_state huge", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).ProvisionState = big }), "batch.devices[0].facts.provision_state"},
		{"fact power_state NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).PowerState = "\x00" }), "batch.devices[0].facts.power_state"},
		{"fact resource_class control", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).ResourceClass = "gpu\n" }), "batch.devices[0].facts.resource_class"},
		{"fact instance_uuid NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).InstanceUuid = "\x00" }), "batch.devices[0].facts.instance_uuid"},
		{"fact lessee huge", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).Lessee = big }), "batch.devices[0].facts.lessee"},
		{"fact owner NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).Owner = "\x00" }), "batch.devices[0].facts.owner"},
		{"fact conductor_group NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).ConductorGroup = "\x00" }), "batch.devices[0].facts.conductor_group"},
		{"fact fault huge", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).Fault = big }), "batch.devices[0].facts.fault"},
		{"fact cpu_arch NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).CpuArch = proto.String("x86\x0064") }), "batch.devices[0].facts.cpu_arch"},
		{"mismatch server id NUL", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).InstanceMismatches[0].NovaServerId = "\x00" }),
			"batch.devices[0].facts.instance_mismatches[0].nova_server_id"},
		{"mismatch status control", batch(func(b *ironlinkv1.ConditionBatch) { facts(b).InstanceMismatches[0].NovaServerStatus = "A\x07" }),
			"batch.devices[0].facts.instance_mismatches[0].nova_server_status"},
		{"site condition message NUL", siteConds(func(c *ironlinkv1.Condition) { c.Message = "\x00" }), "site_conditions.conditions[0].message"},
		{"site condition type huge", siteConds(func(c *ironlinkv1.Condition) { c.Type = big }), "site_conditions.conditions[0].type"},
		{"result command id huge", result(func(r *ironlinkv1.CommandResult) { r.CommandId = big }), "command_result.command_id"},
		{"result device id huge", result(func(r *ironlinkv1.CommandResult) { r.DeviceId = big }), "command_result.device_id"},
		{"result error NUL", result(func(r *ironlinkv1.CommandResult) { r.Error = "placement\x00503" }), "command_result.error"},
		{"result detail control", result(func(r *ironlinkv1.CommandResult) { r.Detail = "ok\x1b[31m" }), "command_result.detail"},
		{"correction device id huge", correction(func(c *ironlinkv1.DriftCorrection) { c.DeviceId = big }), "drift_correction.device_id"},
		{"correction detail NUL", correction(func(c *ironlinkv1.DriftCorrection) { c.Detail = "\x00" }), "drift_correction.detail"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			if f := grpcerr.Fields(err); !slices.Contains(f, tc.field) {
				t.Fatalf("fields %v, want %s (%v)", f, tc.field, err)
			}
			if n := len(status.Convert(err).Message()); n > 512 {
				t.Fatalf("reply message is %d bytes: input echoed", n)
			}
		})
	}
}

// TestLongResultTextIsCutNotRefused: a result's error over the limit is cut
// at a UTF-8 boundary (a multi-byte rune across the limit is dropped whole),
// so PostgreSQL gets valid UTF-8.
func TestLongResultTextIsCutNotRefused(t *testing.T) {
	r, err := ToResult(&ironlinkv1.CommandResult{CommandId: cmdA, DeviceId: devA, Generation: 1,
		Error: strings.Repeat("a", MaxResultTextBytes-1) + "é" + "tail"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != strings.Repeat("a", MaxResultTextBytes-1) {
		t.Fatalf("cut to %d bytes ending %q", len(r.Error), r.Error[len(r.Error)-4:])
	}
}
