package ctl

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// bulkFleet answers ListCommands with one command for each of n devices of
// site "s" (as a bulk request makes), and serves those devices by
// GetDevice and by ListDevices in pages of 100.
type bulkFleet struct {
	ironlinkv1.UnimplementedFleetServiceServer
	n                 int
	gets, listDevices atomic.Int32
}

func (f *bulkFleet) id(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func (f *bulkFleet) ListCommands(context.Context, *ironlinkv1.ListCommandsRequest) (*ironlinkv1.ListCommandsResponse, error) {
	r := &ironlinkv1.ListCommandsResponse{}
	for i := range f.n {
		r.Commands = append(r.Commands, &ironlinkv1.OperatorCommand{CommandId: fmt.Sprintf("c%07d", i), DeviceId: f.id(i), Site: "s",
			Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, State: ironlinkv1.CommandState_COMMAND_STATE_PENDING})
	}
	return r, nil
}

func (f *bulkFleet) GetDevice(_ context.Context, req *ironlinkv1.GetDeviceRequest) (*ironlinkv1.GetDeviceResponse, error) {
	f.gets.Add(1)
	i, _ := strconv.Atoi(req.GetDeviceId()[24:])
	return &ironlinkv1.GetDeviceResponse{Device: &ironlinkv1.Device{DeviceId: req.GetDeviceId(), Site: "s", Name: fmt.Sprintf("node-%04d", i)}}, nil
}

func (f *bulkFleet) ListDevices(_ context.Context, req *ironlinkv1.ListDevicesRequest) (*ironlinkv1.ListDevicesResponse, error) {
	f.listDevices.Add(1)
	start, _ := strconv.Atoi(req.GetPageToken())
	r := &ironlinkv1.ListDevicesResponse{}
	for i := start; i < f.n && i < start+100; i++ {
		r.Devices = append(r.Devices, &ironlinkv1.Device{DeviceId: f.id(i), Site: "s", Name: fmt.Sprintf("node-%04d", i)})
	}
	if start+100 < f.n {
		r.NextPageToken = strconv.Itoa(start + 100)
	}
	return r, nil
}

// TestGetCommandsNamesEveryDevice: `get commands` of a bulk request (more
// devices than maxNameLookups) shows every device by name, not the first
// 50 by name and the rest by UUID, and finds them by listing the site
// rather than one GetDevice per device.
func TestGetCommandsNamesEveryDevice(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	f := &bulkFleet{n: 250}
	ironlinkv1.RegisterFleetServiceServer(srv, f)
	go srv.Serve(lis)
	defer srv.Stop()
	for _, n := range []int{250, 10} {
		f.n = n
		f.gets.Store(0)
		f.listDevices.Store(0)
		var out, errb bytes.Buffer
		code := Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			[]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", lis.Addr().String(), "--plaintext", "--no-auth",
				"get", "commands", "--limit", "0"})
		if code != ExitOK {
			t.Fatalf("%d devices: exit %d: %s", n, code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != n+1 {
			t.Fatalf("%d devices: %d lines, want %d", n, len(lines), n+1)
		}
		for _, l := range lines[1:] {
			if fields := strings.Fields(l); !strings.HasPrefix(fields[1], "node-") {
				t.Fatalf("%d devices: DEVICE column %q, want a name:\n%s", n, fields[1], l)
			}
		}
		if n > maxNameLookups && (f.gets.Load() != 0 || f.listDevices.Load() != 3) {
			t.Fatalf("%d devices: %d GetDevice and %d ListDevices calls, want 0 and 3", n, f.gets.Load(), f.listDevices.Load())
		}
		if n <= maxNameLookups && (int(f.gets.Load()) != n || f.listDevices.Load() != 0) {
			t.Fatalf("%d devices: %d GetDevice and %d ListDevices calls, want %d and 0", n, f.gets.Load(), f.listDevices.Load(), n)
		}
	}
}
