package operations_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestNovaCreateByTemplate: a NOVA_CREATE naming a template is stored
// with the template of the device's site filled in, the request's own
// fields winning; a template the site does not have is InvalidArgument
// naming it and stores nothing.
func TestNovaCreateByTemplate(t *testing.T) {
	f := newFixture(t)
	file, err := novatemplate.Parse([]byte(`templates:
  - name: slurm-worker
    sites: [site-a]
    image: rocky-9-slurm
    flavor: bm.gpu
    key_name: ops
    user_data: "#cloud-config\n"
    metadata: {role: slurm-worker}
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := operations.NewServer(f.st, operations.Config{NovaTemplates: func() *novatemplate.File { return file }}, testlog.New(t))
	ctx := context.Background()
	start := func(dev string, p *ironlinkv1.NovaCreateParams) (*ironlinkv1.StartOperationResponse, error) {
		return srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE,
			Devices: []string{dev}, Params: &ironlinkv1.OperationParams{NovaCreate: p}, Reason: "test"})
	}
	before := f.checksums(t)
	for _, c := range []struct {
		dev, template, says string
	}{
		{"a-available", "image-node", `no Nova create template "image-node" for site "site-a"`},
	} {
		_, err := start(c.dev, &ironlinkv1.NovaCreateParams{Name: "w1", Template: c.template})
		if status.Code(err) != codes.InvalidArgument || grpcerr.Reason(err) != grpcerr.ReasonInvalidValue || !strings.Contains(status.Convert(err).Message(), c.says) {
			t.Errorf("template %s on %s: %v; want InvalidArgument saying %q", c.template, c.dev, err, c.says)
		}
	}
	if changed := pgtest.ChangedTables(before, f.checksums(t)); len(changed) > 0 {
		t.Fatalf("refused requests changed tables %v", changed)
	}
	resp, err := start("a-available", &ironlinkv1.NovaCreateParams{Name: "w1", Template: "slurm-worker", Flavor: "bm.big", Metadata: map[string]string{"rack": "r7"}})
	if err != nil {
		t.Fatalf("start by template: %v", err)
	}
	stored, err := f.st.GetOperation(ctx, resp.GetOperations()[0].GetOperationId())
	if err != nil {
		t.Fatal(err)
	}
	var p ironlinkv1.OperationParams
	if err := protojson.Unmarshal(stored.Params, &p); err != nil {
		t.Fatal(err)
	}
	n := p.GetNovaCreate()
	if n.GetImage() != "rocky-9-slurm" || n.GetFlavor() != "bm.big" || n.GetKeyName() != "ops" || n.GetUserData() != "#cloud-config\n" ||
		n.GetMetadata()["role"] != "slurm-worker" || n.GetMetadata()["rack"] != "r7" || n.GetTemplate() != "slurm-worker" {
		t.Errorf("stored params %v; want the template expanded, flavor and rack from the request", n)
	}
}
