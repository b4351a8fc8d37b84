package operations_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/accessrules"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/operations"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// simRunner starts a simulator and a runner on it whose progress arrives on
// the returned channel and whose logs go to the returned buffer.
func simRunner(t *testing.T) (*openstacksim.Cloud, *operations.Runner, chan *ironlinkv1.OperationProgress, *lockedBuffer) {
	t.Helper()
	sim, cfg := ostest.StartSim(t, openstacksim.Options{ProvisionStep: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg.Nova = openstack.NovaOn
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	oc, _, err := operations.Connect(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *ironlinkv1.OperationProgress, 1000)
	r := operations.New(ctx, oc, operations.Config{PollInterval: 10 * time.Millisecond,
		Retry: openstack.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxAttempts: 5, Budget: 5 * time.Second}},
		func(p *ironlinkv1.OperationProgress) { got <- p }, log)
	return sim, r, got, logs
}

func final(t *testing.T, got chan *ironlinkv1.OperationProgress, id string) *ironlinkv1.OperationProgress {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case p := <-got:
			if p.GetOperationId() == id && p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
				return p
			}
		case <-deadline:
			t.Fatalf("no final progress for %s", id)
		}
	}
}

// Enrolment passes the BMC credentials to Ironic and never logs them; a
// 409 NodeLocked on the manage request is retried; the requests made are
// all allowed by operations-access-rules.yaml; a redelivery of the finished
// operation answers with its result and sends nothing to OpenStack.
func TestEnrolRetriesLocksLogsNoSecretsAndStaysInItsRules(t *testing.T) {
	sim, r, got, logs := simRunner(t)
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodPut, PathContains: "/states/provision", Status: http.StatusConflict, Times: 2})
	s := spec("secret-node", randMAC())
	s.DriverInfo = map[string]string{"fake_password": "hunter2-do-not-log"}
	req := &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Node: s}
	r.Handle(req)
	p := final(t, got, req.GetOperationId())
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	n, ok := sim.Node(p.GetDeviceId())
	if !ok || n.DriverInfo["fake_password"] != "hunter2-do-not-log" {
		t.Fatalf("driver_info not passed to Ironic: %v", n.DriverInfo)
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("the BMC password was logged:\n%s", logs.String())
	}
	b, err := readRules()
	if err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	for _, q := range sim.Requests() {
		if q.Status == http.StatusConflict {
			conflicts++
		}
		if q.Service == openstacksim.ServiceIdentity || q.Service == "" {
			continue
		}
		if !accessrules.AnyAllows(b, q.Service, q.Method, "/"+strings.TrimPrefix(q.Path, "/")) && q.Path != "" {
			t.Errorf("the operations runner made %s %s %s, which operations-access-rules.yaml does not allow", q.Service, q.Method, q.Path)
		}
	}
	if conflicts != 2 {
		t.Errorf("%d 409 answers seen, want the 2 injected (retried)", conflicts)
	}
	sim.ResetRequests()
	req.Attempt, req.Redelivery = 2, true
	r.Handle(req)
	again := final(t, got, req.GetOperationId())
	if again.GetState() != p.GetState() || again.GetAttempt() != 2 || again.GetDeviceId() != p.GetDeviceId() {
		t.Fatalf("redelivery answered %v", again)
	}
	if n := len(sim.Requests()); n != 0 {
		t.Errorf("a redelivery of a finished operation made %d requests", n)
	}
}

func readRules() ([]accessrules.Rule, error) {
	b, err := os.ReadFile("../../deploy/openstack/operations-access-rules.yaml")
	if err != nil {
		return nil, err
	}
	return accessrules.Parse(b)
}
