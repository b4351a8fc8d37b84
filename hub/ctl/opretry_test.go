package ctl

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// retryOps serves one operation (op) by GetOperation and records the
// StartOperation requests.
type retryOps struct {
	ironlinkv1.UnimplementedOperationServiceServer
	op      *ironlinkv1.Operation
	started []*ironlinkv1.StartOperationRequest
}

func (r *retryOps) GetOperation(context.Context, *ironlinkv1.GetOperationRequest) (*ironlinkv1.GetOperationResponse, error) {
	return &ironlinkv1.GetOperationResponse{Operation: r.op}, nil
}

func (r *retryOps) StartOperation(_ context.Context, req *ironlinkv1.StartOperationRequest) (*ironlinkv1.StartOperationResponse, error) {
	r.started = append(r.started, req)
	return &ironlinkv1.StartOperationResponse{GroupId: "g", Operations: []*ironlinkv1.Operation{{OperationId: "new", Kind: req.GetKind(),
		State: ironlinkv1.OperationState_OPERATION_STATE_PENDING}}}, nil
}

// TestOpRetryStartsTheSameOperation: `op retry` of a FAILED clean starts
// a clean of the same device with the same steps and the new reason; a
// SUCCEEDED operation is refused (exit 8) and an enrol is a usage error,
// neither starting anything.
func TestOpRetryStartsTheSameOperation(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	const id, dev = "7f3c2a10-0000-4000-8000-000000000001", "0b6c7a52-0000-4000-8000-000000000002"
	params := &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}
	ops := &retryOps{op: &ironlinkv1.Operation{OperationId: id, Site: "s", DeviceId: dev, Kind: ironlinkv1.OperationKind_OPERATION_KIND_CLEAN,
		State: ironlinkv1.OperationState_OPERATION_STATE_FAILED, Params: params}}
	ironlinkv1.RegisterOperationServiceServer(srv, ops)
	go srv.Serve(lis)
	defer srv.Stop()
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			append([]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", lis.Addr().String(), "--plaintext", "--no-auth"}, args...))
		return code, out.String() + errb.String()
	}
	if code, out := run("op", "retry", id, "--reason", "network fixed"); code != ExitOK || len(ops.started) != 1 {
		t.Fatalf("op retry: exit %d, %d started\n%s", code, len(ops.started), out)
	}
	got := ops.started[0]
	if got.GetKind() != ironlinkv1.OperationKind_OPERATION_KIND_CLEAN || len(got.GetDevices()) != 1 || got.GetDevices()[0] != "s/"+dev ||
		!proto.Equal(got.GetParams(), params) || got.GetReason() != "network fixed" || got.GetForce() {
		t.Fatalf("op retry started %v", got)
	}
	if code, _ := run("op", "retry", id); code != ExitUsage {
		t.Errorf("op retry without --reason: exit %d, want %d", code, ExitUsage)
	}
	ops.op.State = ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED
	if code, out := run("op", "retry", id, "--reason", "x"); code != ExitRefused || !strings.Contains(out, "only a FAILED or CANCELLED operation is retried") {
		t.Errorf("op retry of a SUCCEEDED operation: exit %d\n%s", code, out)
	}
	ops.op.State, ops.op.Kind = ironlinkv1.OperationState_OPERATION_STATE_FAILED, ironlinkv1.OperationKind_OPERATION_KIND_ENROL
	if code, out := run("op", "retry", id, "--reason", "x"); code != ExitUsage || !strings.Contains(out, "op start enrol") {
		t.Errorf("op retry of an enrol: exit %d\n%s", code, out)
	}
	if len(ops.started) != 1 {
		t.Errorf("refused retries started %d operations", len(ops.started)-1)
	}
}
