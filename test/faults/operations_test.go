package faults

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// Operations (docs/reference/operations.md) in fault scenarios: a site's
// clouds.yaml names a second cloud, opsCloud, on the same simulator (one
// application credential), and a satellite started with opsSatArgs runs
// the operations the hub sends it.

// opsCloud is the cloud of the operations credential in every site's
// clouds.yaml (newSite).
const opsCloud = "sim-ops"

// opsSatArgs are the satellite flags that make it announce the operations
// capability and run operations, reading a node every 200 ms while one
// waits.
func opsSatArgs() []string {
	return []string{"--operations-cloud", opsCloud, "--operations-poll-interval", "200ms"}
}

// startReboots starts one forced REBOOT per device of the site through
// api and returns the operations' ids. Until the site's satellite has
// linked and announced the operations capability the hub answers NotFound
// or FailedPrecondition; those are waited out (up to a minute), anything
// else fails the test.
func startReboots(t *testing.T, api ironlinkv1.OperationServiceClient, siteName string, devices []string) []string {
	t.Helper()
	var r *ironlinkv1.StartOperationResponse
	harness.Eventually(t, 60*time.Second, func() error {
		var err error
		r, err = api.StartOperation(ctxTimeout(t, 10*time.Second), &ironlinkv1.StartOperationRequest{
			Kind: ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, Site: siteName, Devices: devices,
			Reason: "fault suite", Force: true})
		if c := status.Code(err); c == codes.NotFound || (c == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "capability")) {
			return err
		}
		if err != nil {
			t.Fatalf("start reboots: %v", err)
		}
		return nil
	})
	ids := make([]string, 0, len(r.GetOperations()))
	for _, op := range r.GetOperations() {
		ids = append(ids, op.GetOperationId())
	}
	if len(ids) != len(devices) {
		t.Fatalf("%d operations started for %d devices", len(ids), len(devices))
	}
	return ids
}

// waitOpsFinal waits until every operation is SUCCEEDED, FAILED or
// CANCELLED and returns them in the order of ids.
func waitOpsFinal(t *testing.T, api ironlinkv1.OperationServiceClient, ids []string, timeout time.Duration) []*ironlinkv1.Operation {
	t.Helper()
	out := make([]*ironlinkv1.Operation, len(ids))
	harness.Eventually(t, timeout, func() error {
		for i, id := range ids {
			r, err := api.GetOperation(ctxTimeout(t, 5*time.Second), &ironlinkv1.GetOperationRequest{OperationId: id})
			if err != nil {
				return err
			}
			out[i] = r.GetOperation()
			if s := out[i].GetState(); s == ironlinkv1.OperationState_OPERATION_STATE_PENDING || s == ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
				return errorf("operation %s still %v", id, s)
			}
		}
		return nil
	})
	return out
}

// checkRebootsOnce fails the test unless every REBOOT SUCCEEDED with at
// most one accepted power off (none for a node already off) and exactly
// one accepted power on on its record, over every attempt: a redelivery
// must resume, not repeat. It reports whether all did.
func checkRebootsOnce(t *testing.T, ops []*ironlinkv1.Operation) bool {
	t.Helper()
	ok := true
	for _, op := range ops {
		if op.GetState() != ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED {
			t.Errorf("operation %s on %s ended %v (%s)", op.GetOperationId(), op.GetDeviceId(), op.GetState(), op.GetLastError())
			ok = false
			continue
		}
		off, on := powerRequests(op, "power off"), powerRequests(op, "power on")
		if off > 1 || on != 1 {
			t.Errorf("operation %s on %s: %d power off and %d power on requests accepted, want at most 1 and 1 (attempts %d)",
				op.GetOperationId(), op.GetDeviceId(), off, on, op.GetAttempts())
			ok = false
		}
	}
	return ok
}

// powerRequests counts the operation's accepted PUT …/states/power with
// target (detail "target=TARGET", maybe followed by more) over every
// attempt's steps.
func powerRequests(op *ironlinkv1.Operation, target string) int {
	n := 0
	for _, s := range op.GetSteps() {
		for _, r := range s.GetRequests() {
			if r.GetMethod() == http.MethodPut && strings.HasSuffix(r.GetPath(), "/states/power") &&
				(r.GetDetail() == "target="+target || strings.HasPrefix(r.GetDetail(), "target="+target+" ")) &&
				r.GetStatus() == http.StatusAccepted {
				n++
			}
		}
	}
	return n
}

// opsClient is the OperationService of the hub at addr.
func opsClient(t *testing.T, addr string) ironlinkv1.OperationServiceClient {
	t.Helper()
	return ironlinkv1.NewOperationServiceClient(harness.Dial(t, addr))
}

// opStates is the operations' states as the hub reports them now, for a
// log line ("RUNNING RUNNING PENDING").
func opStates(t *testing.T, api ironlinkv1.OperationServiceClient, ids []string) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		r, err := api.GetOperation(ctxTimeout(t, 5*time.Second), &ironlinkv1.GetOperationRequest{OperationId: id})
		st := "?"
		if err == nil {
			st = strings.TrimPrefix(r.GetOperation().GetState().String(), "OPERATION_STATE_")
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(st)
	}
	return b.String()
}
