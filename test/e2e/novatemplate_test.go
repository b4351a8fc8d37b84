package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestNovaCreateByTemplateSimulator runs ironlink-hub with
// --nova-templates-file and a satellite with its operations credential on
// openstacksim: a NOVA_CREATE naming a template the site lacks is
// InvalidArgument naming it; one naming slurm-worker boots the server the
// template describes (its image, the template's metadata merged with the
// request's) on exactly that node, and the stored operation shows the
// expanded parameters.
func TestNovaCreateByTemplateSimulator(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 100 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	node := sim.SeedLikeTestbed(1)[0]
	clouds := writeSimOpsClouds(t, sim)
	const site = "tmpl-e2e"
	templates := filepath.Join(t.TempDir(), "templates.yaml")
	if err := os.WriteFile(templates, []byte(`templates:
  - name: slurm-worker
    sites: [tmpl-e2e]
    image: testbed-image
    user_data: "#cloud-config\n"
    metadata: {role: slurm-worker, partition: gpu}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	addr, _ := startHub(t, db, id, "--nova-templates-file", templates, "--heartbeat-interval", "1s")
	cc := id.dialAs(t, addr, "ops-admin")
	fleet, oc := ironlinkv1.NewFleetServiceClient(cc), ironlinkv1.NewOperationServiceClient(cc)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", addr, "--clouds-yaml", clouds,
		"--cloud", "sim", "--operations-cloud", "sim-ops", "--operations-poll-interval", "200ms",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--poll-interval", "1s", "--max-backoff", "2s"}, id.satelliteArgs(site)...)...)
	harness.Eventually(t, time.Minute, func() error {
		_, err := fleet.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: node.UUID})
		return err
	})
	start := func(p *ironlinkv1.NovaCreateParams) (*ironlinkv1.StartOperationResponse, error) {
		return oc.StartOperation(context.Background(), &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE,
			Devices: []string{node.UUID}, Params: &ironlinkv1.OperationParams{NovaCreate: p}, Reason: "e2e template"})
	}
	_, err := start(&ironlinkv1.NovaCreateParams{Name: "w1", Template: "image-node"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), `"image-node"`) {
		t.Fatalf("unknown template: %v; want InvalidArgument naming it", err)
	}
	resp, err := start(&ironlinkv1.NovaCreateParams{Name: "slurm-w1", Template: "slurm-worker", Metadata: map[string]string{"partition": "cpu"}})
	if err != nil {
		t.Fatalf("start by template: %v", err)
	}
	op := waitOp(t, oc, resp.GetOperations()[0].GetOperationId(), 2*time.Minute)
	wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	n := op.GetParams().GetNovaCreate()
	if n.GetImage() != "testbed-image" || n.GetTemplate() != "slurm-worker" || n.GetMetadata()["role"] != "slurm-worker" {
		t.Errorf("stored params %v; want the template expanded", n)
	}
	srv, ok := sim.Server(op.GetServerId())
	if !ok || srv.HypervisorHostname != node.UUID || srv.Metadata["role"] != "slurm-worker" || srv.Metadata["partition"] != "cpu" {
		t.Fatalf("server %s (found %v) on %q with metadata %v; want on %s with the template's role and the request's partition",
			op.GetServerId(), ok, srv.HypervisorHostname, srv.Metadata, node.UUID)
	}
	t.Logf("NOVA_CREATE by template: server %s on %s, %d steps", op.GetServerId(), node.UUID, len(op.GetSteps()))
}
