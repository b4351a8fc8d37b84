package remediation_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/internal/testlog"
)

const templatePolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 50, maxPercent: 100, window: 1h}
    rules:
      - name: faulted
        to: [FAULTED]
        remediation:
          steps:
            - {action: NOVA_CREATE, timeout: 1h, template: image-node}
            - {action: NOVA_CREATE, timeout: 1h, template: slurm-worker}
`

// A NOVA_CREATE step names a template: the step's operation carries the
// template of the device's site expanded, the server named after the
// device; a template the site does not have fails the step without an
// operation, and the ladder goes on to the next.
func TestLadderStepByTemplate(t *testing.T) {
	r := newRig(t, templatePolicy, 1, false)
	file, err := novatemplate.Parse([]byte("templates:\n  - name: slurm-worker\n    sites: [site-a]\n    image: rocky-9-slurm\n    metadata: {role: slurm-worker}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.eng = remediation.New(r.st, remediation.Config{Now: r.clk.Now, NovaTemplates: func() *novatemplate.File { return file }}, testlog.New(t))
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick() // step 1: no template image-node at site-a → failed
	if n := r.count(`SELECT count(*) FROM remediation_steps WHERE step = 0 AND state = 'FAILED'
		AND detail = 'no Nova create template "image-node" for site "site-a"'`); n != 1 {
		t.Fatal("step 1 did not fail naming the missing template")
	}
	r.tick() // step 2
	var raw []byte
	var name string
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT params, device_name FROM operations WHERE device_id = $1 AND kind = 'NOVA_CREATE'`, dev).Scan(&raw, &name); err != nil {
		t.Fatalf("step 2's operation: %v", err)
	}
	var p ironlinkv1.OperationParams
	if err := protojson.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if n := p.GetNovaCreate(); n.GetImage() != "rocky-9-slurm" || n.GetTemplate() != "slurm-worker" || n.GetMetadata()["role"] != "slurm-worker" || n.GetName() != name {
		t.Errorf("step 2's params %v; want slurm-worker expanded, the server named %q", n, name)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 1 {
		t.Errorf("%d operations, want 1 (the failed step made none)", n)
	}
}

const slurmWorkerPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 50, maxPercent: 100, window: 1h}
    rules:
      - name: faulted
        to: [FAULTED]
        remediation:
          steps:
            - {action: NOVA_DELETE, timeout: 30m, continue: true}
            - {action: REPROVISION, timeout: 1h, continue: true}
            - {action: NOVA_CREATE, timeout: 1h, template: slurm-worker}
          settle: 2m
`

// A ladder reprovisions a SLURM worker as one: NOVA_DELETE and
// REPROVISION continue to the next step as soon as their operation
// succeeds (no success test: the fault still shows, no timeout waited
// for), NOVA_CREATE boots the worker from its template, and the success
// test after it fixes the device, naming step 3. A continuing step whose
// operation fails fails as any step and the ladder goes on.
func TestSlurmWorkerLadderContinues(t *testing.T) {
	r := newRig(t, slurmWorkerPolicy, 2, false)
	file, err := novatemplate.Parse([]byte("templates:\n  - name: slurm-worker\n    sites: [site-a]\n    image: rocky-9-slurm\n    metadata: {role: slurm-worker}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.eng = remediation.New(r.st, remediation.Config{Now: r.clk.Now, NovaTemplates: func() *novatemplate.File { return file }}, testlog.New(t))
	dev, other := r.site.IDs[0], r.site.IDs[1]
	r.site.Fault([]string{dev, other}, "DeployFailed", r.clk.Now())
	r.tick()
	for i, kind := range []string{"NOVA_DELETE", "REPROVISION", "NOVA_CREATE"} {
		if got := r.finishOps(dev, "SUCCEEDED"); got != kind {
			t.Fatalf("step %d: %s, want %s", i+1, got, kind)
		}
		r.tick() // a continuing step ends; the next starts in the next pass
		r.tick()
	}
	if n := r.count(`SELECT count(*) FROM remediation_steps s JOIN remediation_ladders l ON l.id = s.ladder_id
		WHERE l.device_id = $1 AND s.state = 'SUCCEEDED' AND s.step < 2 AND s.detail LIKE '%continues with the next step%'`, dev); n != 2 {
		t.Fatalf("%d continuing steps succeeded, want 2", n)
	}
	var raw []byte
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT params FROM operations WHERE device_id = $1 AND kind = 'NOVA_CREATE'`, dev).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p ironlinkv1.OperationParams
	if err := protojson.Unmarshal(raw, &p); err != nil || p.GetNovaCreate().GetImage() != "rocky-9-slurm" {
		t.Fatalf("NOVA_CREATE params %v: %v", &p, err)
	}
	r.site.Heal(dev)
	r.tick()
	r.clk.Add(2*time.Minute + time.Second)
	r.tick()
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND state = 'SUCCEEDED' AND fixed_step = 3
		AND fixed_kind = 'NOVA_CREATE' AND released`, dev); n != 1 {
		t.Fatal("the ladder does not say step 3 (NOVA_CREATE) fixed it")
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 3 {
		t.Fatalf("%d operations, want 3 (none repeated)", n)
	}
	pf, err := policy.Parse([]byte(slurmWorkerPolicy))
	if err != nil {
		t.Fatal(err)
	}
	api := remediation.NewAPI(r.st, func() *policy.File { return pf }, func(context.Context) string { return "alice" }, testlog.New(t))
	got, err := api.GetDeviceRemediation(context.Background(), &ironlinkv1.GetDeviceRemediationRequest{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLadder(); len(l) != 3 || !l[0].GetContinues() || !l[1].GetContinues() || l[2].GetContinues() {
		t.Errorf("explain's ladder %v: steps 1 and 2 continue, 3 does not", l)
	}

	// The other device: its NOVA_DELETE fails → step 1 FAILED, step 2 runs.
	if got := r.finishOps(other, "FAILED"); got != "NOVA_DELETE" {
		t.Fatalf("other's step 1: %s", got)
	}
	r.tick()
	r.tick()
	if n := r.count(`SELECT count(*) FROM remediation_steps s JOIN remediation_ladders l ON l.id = s.ladder_id
		WHERE l.device_id = $1 AND s.step = 0 AND s.state = 'FAILED'`, other); n != 1 {
		t.Fatal("a continuing step whose operation failed did not fail")
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REPROVISION' AND state = 'PENDING'`, other); n != 1 {
		t.Fatal("the ladder did not go on to step 2")
	}
}
