package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/test/harness"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// bins holds ironlink-hub, ironlink-satellite and ironlink, built once.
var bins harness.Binaries

func TestMain(m *testing.M) { harness.Main(m, &bins, "./hub/cmd/ironlink") }

// site is the test's main site; otherSite has three more nodes named
// node-001…node-003 too, so those names are ambiguous.
const (
	site       = "cli"
	otherSite  = "cli-b"
	otherNodes = 3
)

// fleet is one test's hub, satellite and simulator, and a CLI config with
// contexts for an admin (read+write), a viewer (read) and a stranger (a key
// the roster does not know).
type fleet struct {
	t         *testing.T
	sim       *openstacksim.Cloud
	hub       string
	satellite *harness.Proc
	config    string
	api       ironlinkv1.FleetServiceClient
	nodes     map[string]string // name → UUID
	// healthSock is the main site's satellite's local health door.
	healthSock string
	// web is the hub's fleet view (HTTPS with the hub's certificate, proxy
	// mode: X-Forwarded-User from 127.0.0.1 names the roster client); ca
	// is the certificate's CA file.
	web, ca string
}

// fleetOptions are what some tests add to newFleet's fleet.
type fleetOptions struct {
	// operations: the main site's satellite has an operations credential
	// (the cloud opsCloud on the same simulator) and runs operations.
	operations bool
	// hubArgs are added to the hub's flags (e.g. --policy-file).
	hubArgs []string
}

// opsCloud is the cloud of the operations credential in the main site's
// clouds.yaml (fleetOptions.operations).
const opsCloud = "sim-ops"

func newFleet(t *testing.T, nodes int) *fleet {
	t.Helper()
	return newFleetWith(t, nodes, fleetOptions{})
}

func newFleetWith(t *testing.T, nodes int, o fleetOptions) *fleet {
	t.Helper()
	dir := t.TempDir()
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	f := &fleet{t: t, sim: sim, nodes: map[string]string{}}
	for _, n := range sim.SeedLikeTestbed(nodes) {
		f.nodes[n.Name] = n.UUID
	}
	clouds := filepath.Join(dir, "clouds.yaml")
	cloudsYAML := sim.CloudsYAML("sim")
	if o.operations { // two clouds, one application credential
		cloudsYAML = append(cloudsYAML, strings.TrimPrefix(string(sim.CloudsYAML(opsCloud)), "clouds:\n")...)
	}
	if err := os.WriteFile(clouds, cloudsYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	ca, cert, key, err := tlsutil.GenerateTestPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := func(client string) (string, string) {
		k, err := auth.GenerateKey(auth.AlgES256)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, client+".pem")
		if err := auth.WritePrivateKeyPEM(path, k); err != nil {
			t.Fatal(err)
		}
		kid, _ := auth.Thumbprint(k.Public())
		s, scopes := "", []string{auth.ScopeOperationsRead}
		switch {
		case client == auth.SatelliteClientID(site):
			s, scopes = site, auth.SiteScopes
		case client == auth.SatelliteClientID(otherSite):
			s, scopes = otherSite, auth.SiteScopes
		case client == "ops-admin":
			scopes = append(scopes, auth.ScopeOperationsWrite)
		}
		entry, err := auth.FormatRosterEntry(client, s, scopes, kid, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		return path, entry
	}
	satKey, satEntry := keyFile(auth.SatelliteClientID(site))
	otherKey, otherEntry := keyFile(auth.SatelliteClientID(otherSite))
	adminKey, adminEntry := keyFile("ops-admin")
	viewerKey, viewerEntry := keyFile("ops-viewer")
	strangerKey, _ := keyFile("ops-stranger")
	roster := filepath.Join(dir, "roster.yaml")
	if err := os.WriteFile(roster, []byte("satellites:\n"+satEntry+otherEntry+"operators:\n"+adminEntry+viewerEntry), 0o644); err != nil {
		t.Fatal(err)
	}

	db := pgtest.NewDatabase(t)
	f.hub, f.web, f.ca = harness.FreeAddr(t), harness.FreeAddr(t), ca
	hubArgs := append([]string{"--database-url", db, "--listen", f.hub, "--replica", "hub-1", "--admin-addr", harness.FreeAddr(t),
		"--command-sweep", "1s", "--roster", roster, "--tls-cert", cert, "--tls-key", key,
		"--web-addr", f.web, "--web-auth", "proxy", "--web-trusted-proxies", "127.0.0.1"}, o.hubArgs...)
	hub := harness.Start(t, "ironlink-hub", bins.Hub(), hubArgs...)
	tc, err := tlsutil.ClientConfig(ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	f.api = ironlinkv1.NewFleetServiceClient(f.dial(tc, adminKey, "ops-admin"))
	health := healthpb.NewHealthClient(f.dial(tc, "", ""))
	harness.Eventually(t, 30*time.Second, func() error {
		if hub.Exited() {
			t.Fatalf("hub exited:\n%s", hub.Output())
		}
		r, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			err = fmt.Errorf("health %v", r.GetStatus())
		}
		return err
	})
	f.healthSock = filepath.Join(dir, "health.sock")
	satArgs := []string{"--site", site, "--hub", f.hub,
		"--clouds-yaml", clouds, "--cloud", "sim", "--client-key", satKey, "--hub-ca", ca,
		"--poll-interval", "1s", "--sweep-interval", "1h", "--max-backoff", "1s", "--health-socket", f.healthSock}
	if o.operations {
		satArgs = append(satArgs, "--operations-cloud", opsCloud, "--operations-poll-interval", "200ms")
	}
	f.satellite = harness.Start(t, "ironlink-satellite", bins.Satellite(), satArgs...)
	other := openstacksim.New(openstacksim.Options{})
	if err := other.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	other.SeedLikeTestbed(otherNodes)
	otherClouds := filepath.Join(dir, "other-clouds.yaml")
	if err := other.WriteCloudsYAML(otherClouds, "sim"); err != nil {
		t.Fatal(err)
	}
	harness.Start(t, "ironlink-satellite "+otherSite, bins.Satellite(), "--site", otherSite, "--hub", f.hub,
		"--clouds-yaml", otherClouds, "--cloud", "sim", "--client-key", otherKey, "--hub-ca", ca,
		"--poll-interval", "1s", "--sweep-interval", "1h", "--max-backoff", "1s")

	f.config = filepath.Join(dir, "ironlink.yaml")
	cfg := fmt.Sprintf(`current-context: admin
contexts:
  - name: admin
    hub: %[1]s
    ca: %[2]s
    client-id: ops-admin
    key: %[3]s
  - name: viewer
    hub: %[1]s
    ca: %[2]s
    client-id: ops-viewer
    key: %[4]s
  - name: stranger
    hub: %[1]s
    ca: %[2]s
    client-id: ops-stranger
    key: %[5]s
  - name: nowhere
    hub: %[6]s
    ca: %[2]s
    client-id: ops-admin
    key: %[3]s
`, f.hub, ca, adminKey, viewerKey, strangerKey, harness.FreeAddr(t))
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// every node has reported and none is UNKNOWN
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := f.api.ListDevices(context.Background(), &ironlinkv1.ListDevicesRequest{})
		if err != nil {
			return err
		}
		if len(r.GetDevices()) != nodes+otherNodes {
			return fmt.Errorf("%d devices, want %d", len(r.GetDevices()), nodes+otherNodes)
		}
		for _, d := range r.GetDevices() {
			if d.GetStatus() == ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_UNKNOWN {
				return fmt.Errorf("%s still UNKNOWN", d.GetName())
			}
		}
		return nil
	})
	// and both sites report their site conditions, the first sweep done
	// (OrphanDetection leaves SweepPending), so tables are stable
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := f.api.ListSites(context.Background(), &ironlinkv1.ListSitesRequest{})
		if err != nil {
			return err
		}
		for _, s := range r.GetSites() {
			if len(s.GetConditions()) == 0 {
				return fmt.Errorf("site %s has reported no conditions", s.GetName())
			}
			if !slices.ContainsFunc(s.GetConditions(), func(c *ironlinkv1.Condition) bool { return c.GetType() == "InventoryPolled" }) {
				return fmt.Errorf("site %s has reported no poll yet", s.GetName())
			}
			for _, c := range s.GetConditions() {
				if c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE {
					return fmt.Errorf("site %s: %s is %v (%s)", s.GetName(), c.GetType(), c.GetStatus(), c.GetReason())
				}
			}
		}
		return nil
	})
	return f
}

func (f *fleet) dial(tc *tls.Config, key, client string) *grpc.ClientConn {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if client != "" {
		k, err := auth.LoadPrivateKey(key)
		if err != nil {
			f.t.Fatal(err)
		}
		kid, _ := auth.Thumbprint(k.Public())
		opts = append(opts, grpc.WithPerRPCCredentials(&auth.ClientCredentials{Key: k, KID: kid, ClientID: client, Audience: "ironlink-hub"}))
	}
	cc, err := grpc.NewClient(f.hub, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cc.Close() })
	return cc
}

// result is what one CLI run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run executes the ironlink binary with the fleet's config.
func (f *fleet) run(args ...string) result {
	f.t.Helper()
	cmd := exec.Command(filepath.Join(bins.Dir, "ironlink"), args...)
	cmd.Env = append(os.Environ(), "IRONLINK_CONFIG="+f.config, "HOME="+f.t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("run ironlink: %v", err)
	}
	return result{out.String(), errb.String(), code}
}

// inProcess runs the cobra root in this process with ages printed as
// "<age>", so tables are stable enough for golden files.
func (f *fleet) inProcess(ctx context.Context, args ...string) result {
	var out, errb syncbuf.Buffer
	code := f.inProcessTo(ctx, &out, &errb, func(time.Time) string { return "<age>" }, args...)
	return result{out.String(), errb.String(), code}
}

// inProcessTo is inProcess writing to out and errb as it goes, with ages
// printed by age.
func (f *fleet) inProcessTo(ctx context.Context, out, errb *syncbuf.Buffer, age func(time.Time) string, args ...string) int {
	env := map[string]string{"IRONLINK_CONFIG": f.config}
	return ctl.Execute(ctx, ctl.Options{Stdout: out, Stderr: errb, Getenv: func(k string) string { return env[k] },
		Age: age, PollInterval: 200 * time.Millisecond}, args)
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hexRE  = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
)

// normalize replaces UUIDs and 32-hex project ids (random per run) with
// same-width placeholders, so alignment is still checked.
func normalize(s string) string {
	s = uuidRE.ReplaceAllString(s, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx")
	return hexRE.ReplaceAllString(s, strings.Repeat("h", 32))
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got = normalize(got)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./test/cli -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file (go test ./test/cli -update rewrites it)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func (f *fleet) expect(r result, code int, stdoutHas, stderrHas []string) {
	f.t.Helper()
	if r.code != code {
		f.t.Fatalf("exit %d, want %d\n%v", r.code, code, r)
	}
	for _, s := range stdoutHas {
		if !strings.Contains(r.stdout, s) {
			f.t.Errorf("stdout lacks %q\n%v", s, r)
		}
	}
	for _, s := range stderrHas {
		if !strings.Contains(r.stderr, s) {
			f.t.Errorf("stderr lacks %q\n%v", s, r)
		}
	}
}

func (f *fleet) commandCount() int {
	f.t.Helper()
	r, err := f.api.ListCommands(context.Background(), &ironlinkv1.ListCommandsRequest{PageSize: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(r.GetCommands())
}

// TestCLI drives the binary and the in-process command tree against one
// real fleet of 10 simulated nodes (the test bed's roles, node-001…).
func TestCLI(t *testing.T) {
	f := newFleet(t, 10)
	ctx := context.Background()

	t.Run("tables match the golden files", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
		}{
			{"get-devices", []string{"get", "devices"}},
			{"get-devices-wide", []string{"get", "devices", "-o", "wide", "--site", site}},
			{"get-devices-broken", []string{"get", "devices", "--status", "faulted,maintenance"}},
			{"get-sites", []string{"get", "sites"}},
			{"describe-device", []string{"describe", "device", "node-005", "--history", "3"}},
			{"describe-site", []string{"describe", "site", site}},
			{"get-devices-name", []string{"get", "devices", "--name", "node-00?", "-o", "name"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r := f.inProcess(ctx, tc.args...)
				if r.code != 0 {
					t.Fatalf("%v", r)
				}
				golden(t, tc.name, r.stdout)
			})
		}
	})

	t.Run("-o json and yaml parse back into the API's messages", func(t *testing.T) {
		want, err := f.api.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		check := func(t *testing.T, got *ironlinkv1.ListDevicesResponse) {
			t.Helper()
			if len(got.GetDevices()) != len(want.GetDevices()) {
				t.Fatalf("%d devices, the API lists %d", len(got.GetDevices()), len(want.GetDevices()))
			}
			byID := map[string]*ironlinkv1.Device{}
			for _, w := range want.GetDevices() {
				byID[w.GetDeviceId()] = w
			}
			for i, d := range got.GetDevices() {
				w := byID[d.GetDeviceId()]
				if w == nil || d.GetName() != w.GetName() || d.GetStatus() != w.GetStatus() ||
					d.GetStatusReason() != w.GetStatusReason() || !d.GetStatusChangeTime().AsTime().Equal(w.GetStatusChangeTime().AsTime()) ||
					d.GetFacts().GetProvisionState() != w.GetFacts().GetProvisionState() {
					t.Errorf("device %d: %v\nAPI: %v", i, d, w)
				}
			}
		}
		r := f.run("get", "devices", "--site", site, "-o", "json")
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		var got ironlinkv1.ListDevicesResponse
		if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("-o json does not parse as ListDevicesResponse: %v\n%s", err, r.stdout)
		}
		check(t, &got)

		r = f.run("get", "devices", "--site", site, "-o", "yaml")
		var v any
		if err := yaml.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("-o yaml: %v", err)
		}
		b, err := jsonOf(v)
		if err != nil {
			t.Fatal(err)
		}
		var fromYAML ironlinkv1.ListDevicesResponse
		if err := protojson.Unmarshal(b, &fromYAML); err != nil {
			t.Fatalf("-o yaml does not convert into ListDevicesResponse: %v", err)
		}
		check(t, &fromYAML)

		r = f.run("describe", "device", "cli/node-001", "-o", "json")
		var gd ironlinkv1.GetDeviceResponse
		if err := protojson.Unmarshal([]byte(r.stdout), &gd); err != nil || gd.GetDevice().GetDeviceId() != f.nodes["node-001"] || len(gd.GetDevice().GetConditions()) != 7 {
			t.Fatalf("describe -o json: %v %v\n%v", err, gd.GetDevice(), r)
		}
	})

	t.Run("bad input gets an exit code and says what to do", func(t *testing.T) {
		before := f.commandCount()
		tests := []struct {
			name      string
			args      []string
			code      int
			stderrHas []string
		}{
			{"unknown device suggests names", []string{"describe", "device", "node-0001"}, ctl.ExitNotFound, []string{`no device named "node-0001"`, "did you mean node-001"}},
			{"unknown device in a quarantine changes nothing", []string{"quarantine", "node-009", "nod-002", "--reason", "x"}, ctl.ExitNotFound, []string{`no device named "nod-002"`, "node-002"}},
			{"missing reason", []string{"quarantine", "node-001"}, ctl.ExitUsage, []string{"--reason is required"}},
			{"blank reason", []string{"release", "node-001", "--reason", "  "}, ctl.ExitUsage, []string{"--reason is required"}},
			{"unknown status", []string{"get", "devices", "--status", "broken"}, ctl.ExitUsage, []string{"--status broken: want one or more of", "faulted"}},
			{"unknown output", []string{"get", "sites", "-o", "xml"}, ctl.ExitUsage, []string{"-o xml: want one of wide, json, yaml, name"}},
			{"unknown context", []string{"--context", "prod", "get", "sites"}, ctl.ExitUsage, []string{`no context "prod"`, "admin, viewer"}},
			{"unknown site", []string{"get", "sites", "atlantis"}, ctl.ExitNotFound, []string{`no site "atlantis"`}},
			{"unknown site filter", []string{"get", "devices", "--site", "atlantis"}, ctl.ExitNotFound, []string{`site "atlantis" not found`}},
			{"name pattern with a control character", []string{"get", "devices", "--name", "node\x01*"}, ctl.ExitUsage, []string{"name_pattern"}},
			{"unknown command", []string{"frobnicate"}, ctl.ExitUsage, []string{"unknown command"}},
			{"key not in the roster", []string{"--context", "stranger", "get", "sites"}, ctl.ExitAuth, []string{"the hub refused the key: is client ops-stranger in the roster"}},
			{"viewer may not quarantine", []string{"--context", "viewer", "quarantine", "node-009", "--reason", "x"}, ctl.ExitAuth, []string{"client ops-viewer may not do this", "operations:write"}},
			{"hub not running", []string{"--context", "nowhere", "get", "sites", "--request-timeout", "3s"}, ctl.ExitUnreachable, []string{"cannot reach the hub"}},
			{"ambiguous name lists the candidates", []string{"describe", "device", "node-002"}, ctl.ExitUsage, []string{`device name "node-002" is used by 2 devices`, "cli/", "cli-b/", "name the site: --site SITE or SITE/NAME"}},
			{"ambiguous name in a quarantine changes nothing", []string{"quarantine", "node-009", "node-001", "--reason", "x"}, ctl.ExitUsage, []string{`device name "node-001" is used by 2 devices`}},
			{"site clash in SITE/NAME", []string{"describe", "device", "other/node-001", "--site", site}, ctl.ExitUsage, []string{`names site "other" but --site is "cli"`}},
			{"a mistyped UUID is not looked up as a name", []string{"describe", "device", "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a1"}, ctl.ExitUsage, []string{"not a UUID"}},
			{"op start: a mistyped UUID is not looked up as a name", []string{"op", "start", "inspect", "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a1", "--reason", "x"}, ctl.ExitUsage, []string{"not a UUID"}},
			// SITE/NAME resolves (the refusal is the site's lack of an
			// operations credential, not "no device named").
			{"op start takes SITE/NAME", []string{"op", "start", "inspect", "cli/node-006", "--reason", "x"}, ctl.ExitRefused, []string{`site "cli": its satellite does not offer the "operations" capability`}},
			{"op start: SITE/NAME of another site's name", []string{"op", "start", "inspect", "cli-b/node-006", "--reason", "x"}, ctl.ExitNotFound, []string{`no device named "node-006" at site "cli-b"`}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				f.expect(f.run(tc.args...), tc.code, nil, tc.stderrHas)
			})
		}
		if after := f.commandCount(); after != before {
			t.Fatalf("bad input created %d commands", after-before)
		}
		// the viewer can read; SITE/NAME and --site pick one of a shared name
		f.expect(f.run("--context", "viewer", "get", "devices", "cli/node-001"), 0, []string{"node-001  cli "}, nil)
		f.expect(f.run("describe", "device", "node-001", "--site", otherSite), 0, []string{"Site:               cli-b"}, nil)
		f.expect(f.run("op", "list", "--device", "cli/node-006"), 0, nil, nil)
		// The API takes SITE/NAME (and SITE/UUID) in device_name too.
		g, err := f.api.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceName: otherSite + "/node-001"})
		if err != nil || g.GetDevice().GetSite() != otherSite || g.GetDevice().GetName() != "node-001" {
			t.Errorf("GetDevice device_name %s/node-001: %v %v", otherSite, g.GetDevice(), err)
		}
		g, err = f.api.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceName: site + "/" + f.nodes["node-003"]})
		if err != nil || g.GetDevice().GetDeviceId() != f.nodes["node-003"] {
			t.Errorf("GetDevice device_name %s/UUID: %v %v", site, g.GetDevice(), err)
		}
		if _, err := f.api.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceName: otherSite + "/node-001", Site: site}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetDevice device_name of another site than site: %v, want InvalidArgument", err)
		}
	})

	t.Run("quarantine --wait reaches SUCCEEDED, release gives it back", func(t *testing.T) {
		r := f.run("quarantine", "cli/node-001", "--reason", "GPU 3 throws Xid 79", "--wait", "--timeout", "60s")
		f.expect(r, 0, []string{"cli/node-001: quarantine requested", "cli/node-001: SUCCEEDED"}, nil)
		f.expect(f.run("get", "devices", "--site", site, "node-001"), 0, []string{"QUARANTINED", "quarantined"}, nil)
		r = f.run("describe", "device", "cli/node-001")
		f.expect(r, 0, []string{"Quarantine history", "ops-admin", "GPU 3 throws Xid 79", "SUCCEEDED"}, nil)
		f.expect(f.run("get", "devices", "--impairment", "quarantined", "-o", "name"), 0, []string{"cli/node-001\n"}, nil)

		r = f.run("release", f.nodes["node-001"], "--reason", "GPU replaced", "--wait", "--timeout", "60s")
		f.expect(r, 0, []string{"cli/node-001: SUCCEEDED"}, nil)
		f.expect(f.run("get", "commands", "--device", "cli/node-001"), 0, []string{"release", "quarantine", "SUCCEEDED", "GPU replaced"}, nil)
		// the device a second ago: said so at the top
		f.expect(f.run("describe", "device", "cli/node-001", "--as-of", "1s"), 0, []string{"As of:", "ages count from then", "Name:               node-001"}, nil)
	})

	t.Run("--watch prints the rows that change", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var out, errb syncbuf.Buffer
		code := -1
		done := make(chan struct{})
		go func() {
			// ages that change on every poll, as real ones do: they alone must not reprint a row
			tick := func(time.Time) string { return time.Now().Format("05.000") }
			code = f.inProcessTo(wctx, &out, &errb, tick, "get", "devices", "--site", site, "--watch", "--interval", "200ms")
			close(done)
		}()
		harness.Eventually(t, 10*time.Second, func() error {
			if !strings.Contains(out.String(), "node-010") {
				return fmt.Errorf("no listing yet: %q %q", out.String(), errb.String())
			}
			return nil
		})
		f.expect(f.run("quarantine", "node-010", "--reason", "watch me", "--wait", "--timeout", "60s"), 0, nil, nil)
		harness.Eventually(t, 20*time.Second, func() error {
			if n := strings.Count(out.String(), "node-010"); n < 2 {
				return fmt.Errorf("node-010 printed %d times:\n%s", n, out.String())
			}
			return nil
		})
		cancel()
		<-done
		if code != 0 {
			t.Fatalf("watch exited %d: %s", code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "node-010") || !strings.Contains(last, "QUARANTINED") {
			t.Fatalf("the last line is %q, want node-010's QUARANTINED row\n%s", last, out.String())
		}
		if n := strings.Count(out.String(), "node-001"); n != 1 {
			t.Fatalf("node-001 did not change but is printed %d times:\n%s", n, out.String())
		}
		if strings.Count(out.String(), "NAME") != 1 {
			t.Fatalf("the header is printed more than once:\n%s", out.String())
		}
		f.expect(f.run("release", "node-010", "--reason", "done", "--wait"), 0, nil, nil)
	})

	t.Run("watch follows the change feed and resumes from its cursor", func(t *testing.T) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var out, errb syncbuf.Buffer
		code := -1
		done := make(chan struct{})
		go func() {
			code = f.inProcessTo(wctx, &out, &errb, func(time.Time) string { return "<age>" }, "watch", "--site", site, "-o", "wide")
			close(done)
		}()
		// The stream is open (its start is "now") once watch says so.
		harness.Eventually(t, 30*time.Second, func() error {
			if !strings.Contains(errb.String(), "watching for changes") {
				return fmt.Errorf("watch has not said it is watching: %q", errb.String())
			}
			return nil
		})
		f.expect(f.run("quarantine", "node-010", "--reason", "feed me", "--wait", "--timeout", "60s"), 0, nil, nil)
		harness.Eventually(t, 20*time.Second, func() error {
			o := out.String()
			if !strings.Contains(o, "-> QUARANTINED  QuarantinedByHub") ||
				!strings.Contains(o, "command  cli/node-010  quarantine") || !strings.Contains(o, "SENT -> SUCCEEDED") {
				return fmt.Errorf("watch printed:\n%s%s", o, errb.String())
			}
			return nil
		})
		cancel()
		<-done
		if code != 0 || !strings.Contains(errb.String(), "resume with: ironlink watch --cursor ") || !strings.Contains(errb.String(), " --site "+site) {
			t.Fatalf("watch exited %d: %s", code, errb.String())
		}
		// Resuming from the first change's cursor prints the changes after it, the first one not again.
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		first, _, _ := strings.Cut(lines[0], " ")
		// The resumed watch runs until it has printed the changes after the
		// cursor (at most 30 s; it was a fixed 3 s, which a loaded machine
		// may need just to connect), then is stopped; what it printed by
		// then must be those changes, the first one not again.
		rctx, rcancel := context.WithCancel(ctx)
		defer rcancel()
		var rout, rerr syncbuf.Buffer
		rdone := make(chan struct{})
		go func() {
			defer close(rdone)
			f.inProcessTo(rctx, &rout, &rerr, func(time.Time) string { return "<age>" }, "watch", "--site", site, "-o", "wide", "--cursor", first)
		}()
		want := strings.Join(lines[1:], "\n")
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if len(strings.TrimSpace(rout.String())) >= len(want) {
				break
			}
		}
		// A change made now is printed after anything the watch had still to
		// print: once it shows, a line printed again would have shown too.
		f.expect(f.run("release", "node-010", "--reason", "done again", "--wait"), 0, nil, nil)
		harness.Eventually(t, 20*time.Second, func() error {
			if !strings.Contains(rout.String(), "command  cli/node-010  release") {
				return fmt.Errorf("the resumed watch has not printed the release:\n%s%s", rout.String(), rerr.String())
			}
			return nil
		})
		rcancel()
		<-rdone
		if got := strings.TrimSpace(rout.String()); !strings.HasPrefix(got, want) || strings.Contains(got, lines[0]) {
			t.Fatalf("resumed after %s:\n%s\nwant:\n%s\n%s", first, got, want, rerr.String())
		}
	})

	t.Run("--wait fails with the site's error when the trait write is refused", func(t *testing.T) {
		f.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: "PUT",
			PathContains: f.nodes["node-009"] + "/traits", Status: 403, Times: -1})
		defer f.sim.ClearFaults()
		r := f.run("offer", "node-009", "--reason", "offer it", "--wait", "--timeout", "60s")
		f.expect(r, ctl.ExitCommandFailed, []string{"cli/node-009: FAILED after 1 attempt"}, []string{"1 command did not succeed", "403"})
		f.expect(f.run("get", "devices", "node-009"), 0, []string{"released (failing)"}, nil)
	})

	t.Run("--wait times out when the site is not connected", func(t *testing.T) {
		f.satellite.Stop(15 * time.Second)
		r := f.run("quarantine", "cli/node-002", "--reason", "no satellite", "--wait", "--timeout", "3s")
		f.expect(r, ctl.ExitWaitTimeout, []string{"cli/node-002: PENDING"}, []string{"1 command still not finished after 3s", "site cli is DISCONNECTED", "is its satellite running?"})
	})
}

func jsonOf(v any) ([]byte, error) { return json.Marshal(v) }
