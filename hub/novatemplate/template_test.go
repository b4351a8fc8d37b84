package novatemplate

import (
	"strings"
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

const good = `templates:
  - name: slurm-worker
    sites: [fra1]
    image: rocky-9-slurm
    flavor: bm.gpu
    key_name: ops
    user_data: |
      #cloud-config
      runcmd: [systemctl start slurmd]
    networks: [6c0d3b0e-0a53-4b1e-9a59-0e9d5b8d2f11]
    metadata: {role: slurm-worker, partition: gpu}
  - name: slurm-worker
    image: rocky-9-slurm-generic
  - name: image-node
    image: ubuntu-24.04
`

func TestParseAndLookup(t *testing.T) {
	f, err := Parse([]byte(good))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if tp, ok := f.Lookup("fra1", "slurm-worker"); !ok || tp.Image != "rocky-9-slurm" || tp.Metadata["partition"] != "gpu" {
		t.Errorf("fra1 slurm-worker = %+v, %v; want the fra1 template", tp, ok)
	}
	if tp, ok := f.Lookup("ams2", "slurm-worker"); !ok || tp.Image != "rocky-9-slurm-generic" {
		t.Errorf("ams2 slurm-worker = %+v, %v; want the every-site template", tp, ok)
	}
	if _, ok := f.Lookup("fra1", "nope"); ok {
		t.Error("unknown template found")
	}
	if _, ok := (*File)(nil).Lookup("fra1", "image-node"); ok {
		t.Error("a nil file has a template")
	}
	if f, err := Parse(nil); err != nil || len(f.Templates) != 0 {
		t.Errorf("empty file: %v, %v; want no templates", f, err)
	}
}

func TestParseRefusesNamingTheLine(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown key", "templates:\n  - name: a\n    image: x\n    imagee: y\n", "line 4"},
		{"no image", "templates:\n  - name: a\n", "line 2: templates[0] (a): image: required"},
		{"bad name", "templates:\n  - name: A B\n    image: x\n", "line 2: templates[0] (A B): name must be"},
		{"twice", "templates:\n  - name: a\n    image: x\n  - name: a\n    image: y\n", "line 4: templates[1] (a): name used twice"},
		{"bad network", "templates:\n  - name: a\n    image: x\n    networks: [net1]\n", `networks[0] "net1" is not a network id`},
		{"long metadata", "templates:\n  - name: a\n    image: x\n    metadata: {k: " + strings.Repeat("v", 256) + "}\n", "metadata"},
		{"control char", "templates:\n  - name: a\n    image: \"x\\u0007\"\n", "line 2: templates[0] (a): image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse = %v; want an error containing %q", err, c.want)
			}
		})
	}
}

func TestExpandExplicitFieldsWin(t *testing.T) {
	f, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := f.Lookup("fra1", "slurm-worker")
	in := &ironlinkv1.NovaCreateParams{Template: "slurm-worker", Name: "w1", Flavor: "bm.big", Metadata: map[string]string{"partition": "cpu"}}
	out := Expand(tp, in)
	if out.GetImage() != "rocky-9-slurm" || out.GetFlavor() != "bm.big" || out.GetKeyName() != "ops" || out.GetName() != "w1" {
		t.Errorf("Expand = %v; want the template's image and key, the request's flavor and name", out)
	}
	if out.GetMetadata()["partition"] != "cpu" || out.GetMetadata()["role"] != "slurm-worker" || len(out.GetNetworks()) != 1 {
		t.Errorf("Expand metadata/networks = %v %v; want merged, request's keys winning", out.GetMetadata(), out.GetNetworks())
	}
	if in.GetImage() != "" || len(in.GetMetadata()) != 1 {
		t.Errorf("Expand changed its input: %v", in)
	}
	if !strings.Contains(out.GetUserData(), "slurmd") || out.GetTemplate() != "slurm-worker" {
		t.Errorf("Expand user data / template = %q / %q", out.GetUserData(), out.GetTemplate())
	}
}
