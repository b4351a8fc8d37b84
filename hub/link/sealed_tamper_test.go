package link_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestTamperedSealedEnrolFailsAtOnce: sealed driver_info altered in the
// database (copied from another operation, truncated, emptied) is never
// delivered; the enrolment ends FAILED CredentialsUnavailable at the first
// delivery, saying the sealed value does not open, and leaves nothing
// sealed behind.
func TestTamperedSealedEnrolFailsAtOnce(t *testing.T) {
	h, api, url, _ := sealedOpsHub(t)
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"t-src", "t-copied", "t-truncated", "t-emptied"} {
		resp, err := api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Site: "site-a", Reason: "tamper",
			Nodes: []*ironlinkv1.NodeSpec{{Name: name, Driver: "ipmi", DriverInfo: map[string]string{"ipmi_address": "10.9.0.1", "ipmi_password": "s3cret-" + name}}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Operations[0].GetOperationId())
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []struct {
		sql string
		id  string
	}{
		{`UPDATE operations SET sealed_driver_info = (SELECT sealed_driver_info FROM operations WHERE id = '` + ids[0] + `') WHERE id = $1`, ids[1]},
		{`UPDATE operations SET sealed_driver_info = substring(sealed_driver_info from 1 for length(sealed_driver_info) - 1) WHERE id = $1`, ids[2]},
		{`UPDATE operations SET sealed_driver_info = ''::bytea WHERE id = $1`, ids[3]},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.id); err != nil {
			t.Fatal(err)
		}
	}
	sat := satellite(t, h, "operations")
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		req := nextOperation(t, sat, time.Until(end))
		if req == nil {
			break
		}
		if req.GetOperationId() != ids[0] {
			t.Fatalf("tampered enrolment %s delivered with driver_info %v", req.GetOperationId(), req.GetNode().GetDriverInfo())
		}
	}
	for _, id := range ids[1:] {
		o := waitState(t, api, id, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		if !strings.Contains(o.GetLastError(), "does not open") || strings.Contains(o.GetLastError(), "s3cret") {
			t.Errorf("tampered enrolment %s: %q", o.GetDeviceName(), o.GetLastError())
		}
	}
}
