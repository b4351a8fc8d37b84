package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/store"
)

// The inspected properties a satellite sends in a device's facts (cpus,
// memory_mb in MiB, local_gb in GiB, cpu_arch) go through the link's
// conversion into PostgreSQL and come back unchanged from GetDevice and
// ListDevices; a property the satellite did not know stays unset (not 0);
// a later report replaces them, and one without them unsets them.
func TestInspectedPropertiesRoundTripThroughGetDevice(t *testing.T) {
	ctx := context.Background()
	st, _, _, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, nil, log)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", Replica: "r"})
	if err != nil {
		t.Fatal(err)
	}
	inspected, partial := uuid.NewString(), uuid.NewString()
	seq := uint64(1)
	report := func(facts map[string]*ironlinkv1.DeviceFacts) {
		t.Helper()
		seq++
		b := &ironlinkv1.ConditionBatch{Sequence: seq}
		for id, f := range facts {
			b.Devices = append(b.Devices, &ironlinkv1.DeviceUpdate{DeviceId: id, Facts: f, ObservedTime: timestamppb.New(time.Now())})
		}
		sb, err := link.ToBatch(b)
		if err != nil {
			t.Fatalf("ToBatch: %v", err)
		}
		if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, sb); err != nil {
			t.Fatal(err)
		}
	}
	get := func(id string) *ironlinkv1.DeviceFacts {
		t.Helper()
		g, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
		if err != nil {
			t.Fatalf("GetDevice %s: %v", id, err)
		}
		return g.GetDevice().GetFacts()
	}
	full := &ironlinkv1.DeviceFacts{Name: "gpu-01", ProvisionState: "manageable", ResourceClass: "gpu-h100",
		Cpus: proto.Uint32(64), MemoryMb: proto.Uint64(524288), LocalGb: proto.Uint64(1800), CpuArch: proto.String("x86_64")}
	// Only the CPU count known, and a disk of 0 GiB (a diskless node).
	part := &ironlinkv1.DeviceFacts{Name: "gpu-02", ProvisionState: "available", Cpus: proto.Uint32(8), LocalGb: proto.Uint64(0)}
	report(map[string]*ironlinkv1.DeviceFacts{inspected: full, partial: part})
	if got := get(inspected); !proto.Equal(got, full) {
		t.Errorf("GetDevice facts %v, want %v", got, full)
	}
	got := get(partial)
	if !proto.Equal(got, part) || got.MemoryMb != nil || got.CpuArch != nil || got.LocalGb == nil {
		t.Errorf("partial: GetDevice facts %v, want %v (memory_mb and cpu_arch unset, local_gb 0 set)", got, part)
	}
	list, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a"})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range list.GetDevices() {
		if d.GetDeviceId() == inspected {
			found++
			if !proto.Equal(d.GetFacts(), full) {
				t.Errorf("ListDevices facts %v, want %v", d.GetFacts(), full)
			}
		}
	}
	if found != 1 {
		t.Fatalf("ListDevices lists the inspected device %d times", found)
	}

	// Memory replaced, then a report that no longer knows the properties.
	more := proto.Clone(full).(*ironlinkv1.DeviceFacts)
	more.MemoryMb = proto.Uint64(1048576)
	report(map[string]*ironlinkv1.DeviceFacts{inspected: more})
	if got := get(inspected); got.GetMemoryMb() != 1048576 || !proto.Equal(got, more) {
		t.Errorf("after the memory change: %v, want %v", got, more)
	}
	bare := &ironlinkv1.DeviceFacts{Name: "gpu-01", ProvisionState: "manageable", ResourceClass: "gpu-h100"}
	report(map[string]*ironlinkv1.DeviceFacts{inspected: bare})
	if got := get(inspected); !proto.Equal(got, bare) || got.Cpus != nil {
		t.Errorf("after a report without properties: %v, want %v", got, bare)
	}
}
