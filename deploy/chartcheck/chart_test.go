package chartcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/metrics"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"

	hubpolicy "github.com/ironlink/ironlink/hub/policy"
)

// HelmVersion is the helm release the checks run (the same as .ci/run installs).
const HelmVersion = "v3.22.0"

// kubeVersion is the Kubernetes version helm renders for.
const kubeVersion = "1.33.0"

func chartDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "charts", "hub")
}

// helm returns the command that runs helm: helm from PATH, else `go run`
// at HelmVersion. Under CI=true a helm that cannot be run fails the test;
// elsewhere it skips, saying how to install it.
func helm(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return []string{p}
	}
	cmd := []string{"go", "run", "helm.sh/helm/v3/cmd/helm@" + HelmVersion}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "version", "--short")...).CombinedOutput()
	if err == nil {
		return cmd
	}
	msg := fmt.Sprintf("helm is not on PATH and `go run helm.sh/helm/v3/cmd/helm@%s` failed: %v\n%s\ninstall it: go install helm.sh/helm/v3/cmd/helm@%s", HelmVersion, err, out, HelmVersion)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return nil
}

// run runs helm with args in the chart directory.
func run(t *testing.T, h []string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(h[0], append(h[1:], args...)...)
	cmd.Dir = chartDir(t)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// rendered is one chart rendering, decoded.
type rendered struct {
	deployments []appsv1.Deployment
	jobs        []batchv1.Job
	services    []corev1.Service
	configMaps  []corev1.ConfigMap
	accounts    []corev1.ServiceAccount
	pdbs        []policyv1.PodDisruptionBudget
	monitors    []monitoringv1.ServiceMonitor
	rules       []monitoringv1.PrometheusRule
	kinds       []string
}

// decode splits a multi-document render and decodes each object strictly
// (unknown fields and duplicate keys are errors) into its API type.
func decode(t *testing.T, out string) rendered {
	t.Helper()
	var r rendered
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(out, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		into := func(v any) {
			t.Helper()
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				t.Errorf("%s %s: strict decode: %v\n%s", head.APIVersion, head.Kind, err, doc)
			}
		}
		key := head.APIVersion + " " + head.Kind
		r.kinds = append(r.kinds, key)
		switch key {
		case "apps/v1 Deployment":
			decodeInto(into, &r.deployments)
		case "batch/v1 Job":
			decodeInto(into, &r.jobs)
		case "v1 Service":
			decodeInto(into, &r.services)
		case "v1 ConfigMap":
			decodeInto(into, &r.configMaps)
		case "v1 ServiceAccount":
			decodeInto(into, &r.accounts)
		case "policy/v1 PodDisruptionBudget":
			decodeInto(into, &r.pdbs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			decodeInto(into, &r.monitors)
		case "monitoring.coreos.com/v1 PrometheusRule":
			decodeInto(into, &r.rules)
		default:
			t.Errorf("document %d: %s has no API type in this test: add one", i, key)
		}
	}
	return r
}

// decodeInto decodes the document (into) as one more T of list.
func decodeInto[T any](into func(any), list *[]T) {
	var v T
	into(&v)
	*list = append(*list, v)
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// appVersion reads the chart's appVersion.
func appVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}

// Both the defaults and every option on render to objects the API server
// would accept field by field, and keep the chart's promises.
func TestChartRendersStrictlyValidObjects(t *testing.T) {
	h := helm(t)
	cases := []struct {
		name       string
		args       []string
		wantKinds  []string
		wantImage  string
		monitoring bool
		policy     bool
	}{
		{name: "defaults", wantImage: "ironlink/ironlink-hub:" + appVersion(t),
			wantKinds: []string{"apps/v1 Deployment", "batch/v1 Job", "v1 Service", "v1 ConfigMap", "v1 ServiceAccount", "policy/v1 PodDisruptionBudget"}},
		{name: "every option on", args: []string{"-f", "ci/all-on-values.yaml"},
			wantImage: "registry.example/ironlink/ironlink-hub@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			wantKinds: []string{"apps/v1 Deployment", "batch/v1 Job", "v1 Service", "v1 ConfigMap", "v1 ServiceAccount", "policy/v1 PodDisruptionBudget",
				"monitoring.coreos.com/v1 ServiceMonitor", "monitoring.coreos.com/v1 PrometheusRule"},
			monitoring: true, policy: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := run(t, h, append([]string{"lint", ".", "--strict", "--kube-version", kubeVersion}, tc.args...)...); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, h, append([]string{"template", "rel", ".", "--namespace", "metal", "--kube-version", kubeVersion}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			r := decode(t, out)
			for _, k := range tc.wantKinds {
				if !slices.Contains(r.kinds, k) {
					t.Errorf("render lacks a %s; has %v", k, r.kinds)
				}
			}
			if len(r.deployments) != 1 || len(r.jobs) != 1 {
				t.Fatalf("%d deployments, %d jobs; want 1 and 1", len(r.deployments), len(r.jobs))
			}
			d, job := r.deployments[0], r.jobs[0]
			checkRestricted(t, "Deployment", d.Spec.Template.Spec)
			checkRestricted(t, "Job", job.Spec.Template.Spec)
			hub := d.Spec.Template.Spec.Containers[0]
			if hub.Image != tc.wantImage || job.Spec.Template.Spec.Containers[0].Image != tc.wantImage {
				t.Errorf("images %q / %q, want %q", hub.Image, job.Spec.Template.Spec.Containers[0].Image, tc.wantImage)
			}
			if !slices.Equal(hub.Args, []string{"serve", "--migrate=false"}) {
				t.Errorf("hub args %v, want serve --migrate=false (migrations run in the hook Job)", hub.Args)
			}
			if !slices.Equal(job.Spec.Template.Spec.Containers[0].Args, []string{"migrate"}) {
				t.Errorf("job args %v, want migrate", job.Spec.Template.Spec.Containers[0].Args)
			}
			if hooks := job.Annotations["helm.sh/hook"]; hooks != "pre-install,pre-upgrade" {
				t.Errorf("job hook %q, want pre-install,pre-upgrade", hooks)
			}
			for name, p := range map[string]*corev1.Probe{"readiness": hub.ReadinessProbe, "liveness": hub.LivenessProbe, "startup": hub.StartupProbe} {
				want := "/healthz"
				if name == "readiness" {
					want = "/readyz"
				}
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.String() != "admin" || p.HTTPGet.Path != want {
					t.Errorf("%s probe %+v, want GET %s on the admin port", name, p, want)
				}
			}
			if env := envValue(hub, "IRONLINK_HUB_ADMIN_ADDR"); !strings.HasSuffix(env, ":9090") {
				t.Errorf("IRONLINK_HUB_ADMIN_ADDR %q, want the admin port", env)
			}
			if len(d.Spec.Template.Spec.TopologySpreadConstraints) == 0 || d.Spec.Template.Spec.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
				t.Errorf("topology spread %+v, want spread over nodes", d.Spec.Template.Spec.TopologySpreadConstraints)
			}
			if hub.Resources.Requests.Cpu().IsZero() || hub.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v, want CPU requests and a memory limit", hub.Resources)
			}
			// The Go runtime's soft limit is the share of the container's
			// limit the hub would take by itself (hub/app.MemoryLimitRatio).
			if want := strconv.FormatInt(int64(float64(hub.Resources.Limits.Memory().Value())*app.MemoryLimitRatio), 10); envValue(hub, "GOMEMLIMIT") != want {
				t.Errorf("GOMEMLIMIT %q, want %s: 90 %% of the memory limit %s", envValue(hub, "GOMEMLIMIT"), want, hub.Resources.Limits.Memory())
			}
			if len(r.pdbs) != 1 || r.pdbs[0].Spec.MaxUnavailable == nil || r.pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1", r.pdbs)
			}
			for _, p := range r.pdbs {
				if !selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
					t.Errorf("PDB selector %v does not select the hub pods %v", p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
				}
				if selects(p.Spec.Selector.MatchLabels, job.Spec.Template.Labels) {
					t.Errorf("PDB selector %v also selects the migration pod %v", p.Spec.Selector.MatchLabels, job.Spec.Template.Labels)
				}
			}
			checkRoster(t, r.configMaps)
			checkPolicy(t, r.configMaps, envValue(d.Spec.Template.Spec.Containers[0], "IRONLINK_HUB_POLICY_FILE"), tc.policy)
			if tc.monitoring {
				checkMonitoring(t, r)
			}
		})
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// checkRestricted applies the restricted Pod Security Standard
// (kubernetes.io/docs/concepts/security/pod-security-standards) plus a
// read-only root filesystem.
func checkRestricted(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	podNonRoot := psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
	podSeccomp := psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("%s: host namespaces in use", what)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("%s: hostPath volume %s", what, v.Name)
		}
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s/%s: no securityContext", what, c.Name)
			continue
		}
		if !(podNonRoot || (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot)) {
			t.Errorf("%s/%s: runAsNonRoot not set", what, c.Name)
		}
		if (sc.RunAsUser != nil && *sc.RunAsUser == 0) || (psc != nil && psc.RunAsUser != nil && *psc.RunAsUser == 0) {
			t.Errorf("%s/%s: runs as UID 0", what, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allowPrivilegeEscalation is not false", what, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root filesystem writable", what, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s/%s: capabilities %+v, want drop ALL and none added", what, c.Name, sc.Capabilities)
		}
		if !(podSeccomp || (sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)) {
			t.Errorf("%s/%s: seccomp profile not RuntimeDefault", what, c.Name)
		}
	}
}

// checkPolicy: with a policy in the values the roster ConfigMap carries a
// policy.yaml the hub's loader accepts and the hub is pointed at it; without
// one there is neither.
func checkPolicy(t *testing.T, cms []corev1.ConfigMap, env string, want bool) {
	t.Helper()
	for _, cm := range cms {
		data, ok := cm.Data["policy.yaml"]
		if !ok {
			continue
		}
		if !want {
			t.Fatalf("policy.yaml rendered without a policy in the values:\n%s", data)
		}
		if _, err := hubpolicy.Parse([]byte(data)); err != nil {
			t.Fatalf("rendered policy refused by the hub: %v\n%s", err, data)
		}
		if env != "/etc/ironlink/roster/policy.yaml" {
			t.Fatalf("IRONLINK_HUB_POLICY_FILE = %q, want the mounted policy.yaml", env)
		}
		return
	}
	if want {
		t.Fatal("no policy.yaml rendered although the values have a policy")
	}
	if env != "" {
		t.Fatalf("IRONLINK_HUB_POLICY_FILE = %q without a policy", env)
	}
}

// checkRoster: the rendered roster ConfigMap is a roster the hub accepts.
func checkRoster(t *testing.T, cms []corev1.ConfigMap) {
	t.Helper()
	for _, cm := range cms {
		if data, ok := cm.Data["roster.yaml"]; ok {
			r, err := auth.ParseRoster([]byte(data))
			if err != nil {
				t.Fatalf("rendered roster refused by the hub: %v\n%s", err, data)
			}
			if len(r.Clients()) == 0 {
				t.Fatalf("rendered roster has no clients:\n%s", data)
			}
			return
		}
	}
	t.Fatal("no roster ConfigMap rendered")
}

// exportedMetrics returns every series name the hub exports, after driving
// each hook once so that every labelled family exists.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New("r")
	hooks := m.LinkHooks()
	hooks.LinkOpened("s")
	hooks.LinkEnded("s", "closed")
	hooks.BatchCommitted("s", 1, false, false, time.Millisecond)
	hooks.CommandSent("s", "c", false)
	hooks.CommandResult("s", "c", true, false)
	m.WatchLinks(func() int { return 1 })
	m.WatchRoster(func() error { return nil })
	m.WatchDatabase(fakeDB{}, time.Second, nil)
	ph := m.WatchPolicy(func(context.Context) ([]metrics.PolicySiteState, error) {
		return []metrics.PolicySiteState{{Site: "s", Tripped: true, PendingHeld: 1,
			CommonCause:    []metrics.LabelShare{{Label: "rack", Value: "r1", Faults: 2}},
			TrippedDomains: []metrics.TrippedDomain{{Label: "rack", Value: "r1", Held: 1}}}}, nil
	}, nil)
	ph.Decided("QUARANTINE", false, time.Second)
	ph.Leading(true)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	m.GRPC.InitializeMetrics(srv)
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

type fakeDB struct{}

func (fakeDB) SiteLinks(context.Context) ([]store.SiteLink, error) {
	return []store.SiteLink{{Site: "s", Replica: "r", LastSeen: time.Now()}}, nil
}

func (fakeDB) OpenCommandStats(context.Context) ([]store.OpenCommands, error) {
	return []store.OpenCommands{{State: store.CommandPending, Count: 1, OldestCreated: time.Now()}}, nil
}

var metricRe = regexp.MustCompile(`\b(ironlink_[a-z_]+|grpc_server_[a-z_]+|process_[a-z_]+)\b`)

// checkMonitoring: the ServiceMonitor selects the admin Service, the rules
// are the promised ones, and rules and dashboard only name exported metrics.
func checkMonitoring(t *testing.T, r rendered) {
	t.Helper()
	exported := exportedMetrics(t)
	var admin *corev1.Service
	for i, s := range r.services {
		for _, p := range s.Spec.Ports {
			if p.Name == "admin" {
				admin = &r.services[i]
			}
		}
	}
	if admin == nil {
		t.Fatal("no Service with an admin port")
	}
	if len(r.monitors) != 1 || !selects(r.monitors[0].Spec.Selector.MatchLabels, admin.Labels) || r.monitors[0].Spec.Endpoints[0].Port != "admin" {
		t.Errorf("ServiceMonitor %+v does not scrape the admin Service (labels %v)", r.monitors, admin.Labels)
	}
	want := []string{"IronlinkSiteUnreachable", "IronlinkCommandStuck", "IronlinkPolicyGuardTripped", "IronlinkLinkTakeovers", "IronlinkNoLinks", "IronlinkDatabaseErrors", "IronlinkReplicaNotReady"}
	var got []string
	for _, pr := range r.rules {
		for _, g := range pr.Spec.Groups {
			for _, rule := range g.Rules {
				got = append(got, rule.Alert)
				expr := rule.Expr.String()
				if !strings.Contains(expr, `job="`+admin.Name+`"`) {
					t.Errorf("%s: %s does not select job %q", rule.Alert, expr, admin.Name)
				}
				for _, name := range metricRe.FindAllString(expr, -1) {
					if !exported[name] {
						t.Errorf("%s: %s names %s, which the hub does not export", rule.Alert, expr, name)
					}
				}
			}
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("PrometheusRule lacks %s; has %v", w, got)
		}
	}
	var dash []byte
	for _, cm := range r.configMaps {
		if d, ok := cm.Data["ironlink-hub.json"]; ok {
			dash = []byte(d)
		}
	}
	if dash == nil {
		t.Fatal("no dashboard ConfigMap rendered")
	}
	var board struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &board); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if len(board.Panels) < 10 {
		t.Errorf("dashboard has %d panels", len(board.Panels))
	}
	for _, p := range board.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricRe.FindAllString(tg.Expr, -1) {
				if !exported[name] {
					t.Errorf("dashboard panel %q names %s, which the hub does not export", p.Title, name)
				}
			}
		}
	}
}

// values.schema.json refuses a malformed roster (and unknown keys) before
// anything is rendered, naming the bad field.
func TestSchemaRefusesBadValues(t *testing.T) {
	h := helm(t)
	key := "{kid: k1, jwk: {kty: OKP, crv: Ed25519, x: XNJxxA9b13cnBYtcF19hwmflS4DErYaQLXVGuJZD_KA}}"
	cases := []struct {
		name, values, want string
	}{
		{"satellite without a site", "satellites: [{clientId: ironlink-agent-a, scopes: [device:update], keys: [" + key + "]}]", "site"},
		{"satellite client id not ironlink-agent-", "satellites: [{clientId: agent-a, site: a, scopes: [device:update], keys: [" + key + "]}]", "clientId"},
		{"unknown scope", "operators: [{clientId: ops, scopes: [operations:everything], keys: [" + key + "]}]", "scopes"},
		{"operator with a satellite scope", "operators: [{clientId: ops, scopes: [device:update], keys: [" + key + "]}]", "scopes"},
		{"key without kid", "operators: [{clientId: ops, scopes: [operations:read], keys: [{jwk: {kty: OKP}}]}]", "kid"},
		{"key with neither PEM nor JWK", "operators: [{clientId: ops, scopes: [operations:read], keys: [{kid: k}]}]", "keys"},
		{"no keys", "operators: [{clientId: ops, scopes: [operations:read], keys: []}]", "keys"},
		{"unknown entry field", "operators: [{clientId: ops, scopes: [operations:read], keys: [" + key + "], site: x}]", "site"},
		{"unknown top-level key", "replicas: 3", "replicas"},
		{"bad duration", "hub: {staleAfter: soon}", "staleAfter"},
		{"operator bound to a badly named site", "operators: [{clientId: ops, sites: [Site_A], scopes: [operations:read], keys: [" + key + "]}]", "sites"},
		{"operator bound to no site", "operators: [{clientId: ops, sites: [], scopes: [operations:read], keys: [" + key + "]}]", "sites"},
		{"negative operator rate", "hub: {operatorRate: -1}", "operatorRate"},
		{"memory sized for no link", "memory: {links: 0, baseMiB: 32, perLinkKiB: 100}", "links"},
	}
	dir := t.TempDir()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, fmt.Sprintf("v%d.yaml", i))
			if err := os.WriteFile(f, []byte(tc.values+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := run(t, h, "template", "rel", ".", "--kube-version", kubeVersion, "-f", f)
			if err == nil {
				t.Fatalf("values %q rendered; want the schema to refuse them", tc.values)
			}
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name the schema and %q: %v", tc.want, err)
			}
		})
	}
}

// The container's memory limit is derived from the links a replica is
// sized for and the documented per-link figure (values.yaml memory.*,
// docs/design/performance.md "Memory limit") unless resources.limits sets
// memory, and GOMEMLIMIT is 90 % of whichever limit the pod gets.
func TestChartDerivesTheMemoryLimitFromLinks(t *testing.T) {
	h := helm(t)
	mi := func(links, base, perLink float64) string {
		return fmt.Sprintf("%.0fMi", math.Ceil((base+links*perLink/1024)/app.MemoryLimitRatio))
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"defaults", nil, mi(4000, 32, 100)},
		{"10,000 links", []string{"--set", "memory.links=10000"}, mi(10000, 32, 100)},
		{"another per-link figure", []string{"--set", "memory.links=10000", "--set", "memory.perLinkKiB=40"}, mi(10000, 32, 40)},
		{"limit set explicitly", []string{"--set", "memory.links=10000", "--set", "resources.limits.memory=3Gi"}, "3Gi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, h, append([]string{"template", "rel", ".", "--kube-version", kubeVersion}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			r := decode(t, out)
			if len(r.deployments) != 1 {
				t.Fatalf("%d deployments, want 1", len(r.deployments))
			}
			hub := r.deployments[0].Spec.Template.Spec.Containers[0]
			got := hub.Resources.Limits.Memory()
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 {
				t.Errorf("memory limit %s, want %s", got, tc.want)
			}
			if want := strconv.FormatInt(int64(float64(got.Value())*app.MemoryLimitRatio), 10); envValue(hub, "GOMEMLIMIT") != want {
				t.Errorf("GOMEMLIMIT %q, want %s: 90 %% of the memory limit %s", envValue(hub, "GOMEMLIMIT"), want, got)
			}
		})
	}
}

// .ci/run installs the helm version these checks pin.
func TestCIInstallsThePinnedHelm(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "..", "..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "HELM_VERSION="+HelmVersion+"\n") || !strings.Contains(string(b), "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") {
		t.Errorf(".ci/run does not install helm %s", HelmVersion)
	}
}

// The hub metrics table of docs/reference/metrics.md ("Hub metrics")
// names exactly the metric families the hub exports (Go and process
// metrics aside), so the list an operator reads is the list Prometheus
// scrapes.
func TestMetricsReferenceListsEveryHubMetric(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "..", "..", "..", "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "## Hub metrics")
	end := strings.Index(text[max(start, 0):], "plus Go (`go_*`)")
	if start < 0 || end < 0 {
		t.Fatal("docs/reference/metrics.md has no hub metrics table (from \"## Hub metrics\" to \"plus Go (`go_*`)\")")
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(text[start:start+end], "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1] // the metric column
		for _, name := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(first, -1) {
			documented[name[1]] = true
		}
	}
	exported := map[string]bool{}
	for name := range exportedMetrics(t) {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		if strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue // a histogram's series, its family is listed
		}
		exported[name] = true
	}
	for name := range exported {
		if !documented[name] {
			t.Errorf("the hub exports %s but the metrics table of docs/reference/metrics.md does not list it", name)
		}
	}
	for name := range documented {
		if !exported[name] {
			t.Errorf("the metrics table of docs/reference/metrics.md lists %s, which the hub does not export", name)
		}
	}
	if len(documented) < 30 {
		t.Errorf("docs/reference/metrics.md's table lists %d metrics; the table was not parsed", len(documented))
	}
}
