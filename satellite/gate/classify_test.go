package gate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/placement"
)

func httpErr(code int) error {
	return gophercloud.ErrUnexpectedResponseCode{Method: "PUT", URL: "http://ironic/v1/nodes/x/traits/T", Actual: code}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		permanent bool
		reason    string
	}{
		{"nil", nil, false, ""},
		{"node deleted: Ironic 404 on the node", fmt.Errorf("gate: quarantine node n: %w",
			fmt.Errorf("%w: remove trait: n: %w", ironic.ErrNodeNotFound, httpErr(404))), true, "NodeNotFound"},
		{"policy refuses the call: 403", fmt.Errorf("placement: update traits: %w", httpErr(403)), true, "AccessDenied"},
		{"no access rule: 401 after a fresh token", fmt.Errorf("ironic: add trait: %w",
			&gophercloud.ErrErrorAfterReauthentication{ErrOriginal: httpErr(401)}), true, "AccessRuleDenied"},
		{"503 after a fresh token is still a 503", &gophercloud.ErrErrorAfterReauthentication{ErrOriginal: httpErr(503)}, false, "ServiceUnavailable"},
		{"Keystone refuses the credential", &gophercloud.ErrUnableToReauthenticate{ErrOriginal: httpErr(401), ErrReauth: httpErr(401)}, false, "AuthenticationFailed"},
		{"auth guard backing off", fmt.Errorf("x: %w", openstack.ErrAuthBackoff), false, "AuthenticationFailed"},
		{"node locked after the write retries", fmt.Errorf("%w: add trait on node n still refused with 409: %w", ironic.ErrNodeLocked,
			&openstack.RetryError{Op: "add", Attempts: 8, Err: httpErr(409)}), false, "NodeLocked"},
		{"provider generation race outlasted the rounds", fmt.Errorf("%w: trait T: %w", placement.ErrGenerationConflict, httpErr(409)), false, "GenerationConflict"},
		{"other 409", httpErr(409), false, "Conflict"},
		{"503 after retries", &openstack.RetryError{Op: "x", Attempts: 6, Err: httpErr(503)}, false, "ServiceUnavailable"},
		{"500", httpErr(500), false, "ServerError"},
		{"429", httpErr(429), false, "RateLimited"},
		{"400 (more than 50 traits)", httpErr(400), true, "BadRequest"},
		{"406 microversion", httpErr(406), true, "NotAcceptable"},
		{"418", httpErr(418), true, "ClientError"},
		{"command deadline", fmt.Errorf("placement: set trait: %w", context.DeadlineExceeded), false, "Timeout"},
		{"satellite stopping", fmt.Errorf("x: %w", context.Canceled), false, "Canceled"},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), false, "ConnectionFailed"},
		{"something else", errors.New("gate: something odd"), false, "Unclassified"},
		{"quarantine: node 503 and provider 403 → permanent wins", fmt.Errorf("gate: quarantine node n: %w",
			errors.Join(httpErr(503), fmt.Errorf("placement: %w", httpErr(403)))), true, "AccessDenied"},
		{"quarantine: node 503 and provider 409 → the first", errors.Join(httpErr(503), httpErr(409)), false, "ServiceUnavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := gate.Classify(tc.err)
			if got.Permanent() != tc.permanent || got.Reason != tc.reason {
				t.Fatalf("Classify(%v) = %+v, want permanent=%v reason=%s", tc.err, got, tc.permanent, tc.reason)
			}
		})
	}
}

// TestSimFailuresClassified runs Apply against the simulator with the
// failures that matter and checks the class the hub will act on.
func TestSimFailuresClassified(t *testing.T) {
	tests := []struct {
		name       string
		quarantine bool
		setup      func(sim *openstacksim.Cloud, id string)
		permanent  bool
		reason     string
	}{
		{"node deleted from Ironic", true, func(sim *openstacksim.Cloud, id string) {
			if err := sim.DeleteNode(id); err != nil {
				t.Fatal(err)
			}
		}, true, "NodeNotFound"},
		{"Placement policy refuses the trait write (403)", true, func(sim *openstacksim.Cloud, id string) {
			sim.InjectFault(openstacksim.Fault{Service: "placement", Method: http.MethodPut, PathContains: "/resource_providers/" + id + "/traits", Status: 403, Times: -1})
		}, true, "AccessDenied"},
		{"Ironic keeps answering 503", false, func(sim *openstacksim.Cloud, id string) {
			sim.InjectFault(openstacksim.Fault{Service: "baremetal", PathContains: "/v1/nodes/" + id + "/traits", Status: 503, Times: -1})
		}, false, "ServiceUnavailable"},
		{"node locked for longer than the write retries", false, func(sim *openstacksim.Cloud, id string) {
			sim.InjectFault(openstacksim.Fault{Service: "baremetal", Method: http.MethodPut, PathContains: "/v1/nodes/" + id + "/traits/", Status: 409, Times: -1})
		}, false, "NodeLocked"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim, a := newApplier(t, openstacksim.Options{})
			id := sim.SeedLikeTestbed(10)[0].UUID
			tc.setup(sim, id)
			_, err := a.Apply(ctxT(t), id, tc.quarantine)
			if err == nil {
				t.Fatal("Apply succeeded; the test's fault did not bite")
			}
			if got := gate.Classify(err); got.Permanent() != tc.permanent || got.Reason != tc.reason {
				t.Fatalf("Classify(%v) = %+v, want permanent=%v reason=%s", err, got, tc.permanent, tc.reason)
			}
		})
	}
}
