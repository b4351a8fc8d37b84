package remediation_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/novatemplate"
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
