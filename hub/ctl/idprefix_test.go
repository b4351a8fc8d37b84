package ctl

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// prefixOps answers ListOperations with three operations, two of whose ids
// share the prefix "abcd1", over two pages, and GetOperation by id.
type prefixOps struct {
	ironlinkv1.UnimplementedOperationServiceServer
	gets []string
}

var prefixOpIDs = []string{"abcd1111-0000-4000-8000-000000000001", "abcd1222-0000-4000-8000-000000000002", "ef012345-0000-4000-8000-000000000003"}

func (p *prefixOps) ListOperations(_ context.Context, req *ironlinkv1.ListOperationsRequest) (*ironlinkv1.ListOperationsResponse, error) {
	r := &ironlinkv1.ListOperationsResponse{}
	ids := prefixOpIDs[:2]
	if req.GetPageToken() == "2" {
		ids = prefixOpIDs[2:]
	} else {
		r.NextPageToken = "2"
	}
	for _, id := range ids {
		r.Operations = append(r.Operations, &ironlinkv1.Operation{OperationId: id})
	}
	return r, nil
}

func (p *prefixOps) GetOperation(_ context.Context, req *ironlinkv1.GetOperationRequest) (*ironlinkv1.GetOperationResponse, error) {
	p.gets = append(p.gets, req.GetOperationId())
	return &ironlinkv1.GetOperationResponse{Operation: &ironlinkv1.Operation{OperationId: req.GetOperationId(), Site: "s"}}, nil
}

// TestOperationIDPrefix: `op get` takes a unique prefix (found on any
// page), refuses an ambiguous one listing both candidates and a malformed
// one without calling the hub, and says "not found" for a prefix no id has.
func TestOperationIDPrefix(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ops := &prefixOps{}
	ironlinkv1.RegisterOperationServiceServer(srv, ops)
	go srv.Serve(lis)
	defer srv.Stop()
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			append([]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", lis.Addr().String(), "--plaintext", "--no-auth"}, args...))
		return code, out.String(), errb.String()
	}
	for _, tc := range []struct {
		arg, want string
	}{{"EF01", prefixOpIDs[2]}, {"abcd12", prefixOpIDs[1]}, {prefixOpIDs[0], prefixOpIDs[0]}} {
		ops.gets = nil
		if code, out, errb := run("op", "get", tc.arg); code != ExitOK || len(ops.gets) != 1 || ops.gets[0] != tc.want || !strings.Contains(out, tc.want) {
			t.Errorf("op get %s: exit %d, GetOperation %v, want %s\n%s%s", tc.arg, code, ops.gets, tc.want, out, errb)
		}
	}
	ops.gets = nil
	code, _, errb := run("op", "get", "abcd1")
	if code != ExitUsage || !strings.Contains(errb, `prefix "abcd1" is ambiguous`) || !strings.Contains(errb, prefixOpIDs[0]) || !strings.Contains(errb, prefixOpIDs[1]) {
		t.Errorf("ambiguous prefix: exit %d: %s", code, errb)
	}
	if code, _, errb := run("op", "get", "abcd9"); code != ExitNotFound || !strings.Contains(errb, `no operation id starts with "abcd9"`) {
		t.Errorf("unknown prefix: exit %d: %s", code, errb)
	}
	for _, bad := range []string{"abc", "node-007", "abcd1111-0000-4000-8000-00000000000x"} {
		if code, _, errb := run("op", "get", bad); code != ExitUsage || !strings.Contains(errb, "is not a UUID nor a prefix of one") {
			t.Errorf("op get %s: exit %d: %s", bad, code, errb)
		}
	}
	if len(ops.gets) != 0 {
		t.Errorf("refused ids were looked up: %v", ops.gets)
	}
}
