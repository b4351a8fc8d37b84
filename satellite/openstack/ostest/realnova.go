package ostest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Environment variables of the real-cloud end-to-end suites (the same names
// as test/e2e and .ci/run).
const (
	// EnvE2ECloudsYAML is the path of the real cloud's clouds.yaml.
	EnvE2ECloudsYAML = "IRONLINK_E2E_CLOUDS_YAML"
	// EnvE2ECloud is the cloud entry in it (the site's credential).
	EnvE2ECloud = "IRONLINK_E2E_CLOUD"
	// EnvNovaIronic=1 says the real cloud runs Nova with its Ironic driver
	// (nova-compute manages the Ironic nodes and writes their resource
	// providers), so the tests that need it must run: without it they are
	// skipped; with it a missing cloud or a cloud that does not run the
	// driver is a failure, never a skip.
	EnvNovaIronic = "IRONLINK_E2E_NOVA_IRONIC"
)

// NovaIronic is a connection to a real cloud that runs Nova's Ironic driver.
type NovaIronic struct {
	// Config connects to the cloud (the site's credential).
	Config openstack.Config
	// Clients are connected with Config; Placement and Compute are set.
	Clients *openstack.Clients
	// Requests counts every HTTP request made through Clients.
	Requests *RequestCounter
	// Hypervisors maps the Ironic node UUIDs Nova reports as hypervisors
	// (hypervisor_type "ironic") to true.
	Hypervisors map[string]bool
}

// NovaIronicRequired reports whether EnvNovaIronic is "1": the tests that
// need Nova's Ironic driver must run, so nothing they need may be missing.
func NovaIronicRequired() bool { return os.Getenv(EnvNovaIronic) == "1" }

// SkipOrFail fails t when the Nova-Ironic tests must run (EnvNovaIronic=1)
// and skips it otherwise, with the same message.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if NovaIronicRequired() {
		t.Fatalf(format+" ("+EnvNovaIronic+"=1: these tests must run)", args...)
	}
	t.Skipf(format, args...)
}

// RealNovaIronic connects to the real cloud named by EnvE2ECloudsYAML and
// EnvE2ECloud (falling back to EnvCloudsYAML/EnvCloud) for a test that needs
// Nova's Ironic driver. Without EnvNovaIronic=1 it skips t with a clear
// message. With it, a missing cloud, a failed connection, a cloud without
// Placement or Nova, or a Nova whose hypervisors are not Ironic nodes fails
// t.
func RealNovaIronic(t testing.TB) *NovaIronic {
	t.Helper()
	path, cloud := os.Getenv(EnvE2ECloudsYAML), os.Getenv(EnvE2ECloud)
	if path == "" && cloud == "" {
		path, cloud = os.Getenv(EnvCloudsYAML), os.Getenv(EnvCloud)
	}
	if !NovaIronicRequired() {
		req := ""
		if os.Getenv(EnvRequireReal) == "1" {
			req = " (" + EnvRequireReal + "=1 does not force them: the cloud may run Nova without the Ironic driver, or no Nova at all)"
		}
		t.Skipf("needs a real cloud running Nova's Ironic driver: set %s=1 with %s and %s, e.g. %s=1 %s=/work/tb/.openstack-testbed/clouds.yaml %s=testbed against a test bed started with OS_TESTBED_NOVA_DRIVER=ironic%s",
			EnvNovaIronic, EnvE2ECloudsYAML, EnvE2ECloud, EnvNovaIronic, EnvE2ECloudsYAML, EnvE2ECloud, req)
	}
	if path == "" || cloud == "" {
		t.Fatalf("%s=1 but %s / %s are not set: no real cloud to run the Nova-Ironic tests against", EnvNovaIronic, EnvE2ECloudsYAML, EnvE2ECloud)
	}
	rc := &RequestCounter{}
	cfg := openstack.Config{CloudsYAML: path, Cloud: cloud, Placement: openstack.PlacementOn, Nova: openstack.NovaOn, WrapTransport: rc.Wrap}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := openstack.Connect(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("connect to %s in %s (Placement and Nova required): %v", cloud, path, err)
	}
	rc.name(c)
	pages, err := hypervisors.List(c.Compute, hypervisors.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatalf("list Nova hypervisors: %v", err)
	}
	hs, err := hypervisors.ExtractHypervisors(pages)
	if err != nil {
		t.Fatalf("list Nova hypervisors: %v", err)
	}
	ironicHV := map[string]bool{}
	var types []string
	for _, h := range hs {
		types = append(types, h.HypervisorType)
		if strings.EqualFold(h.HypervisorType, "ironic") {
			ironicHV[h.HypervisorHostname] = true
		}
	}
	if len(ironicHV) == 0 {
		t.Fatalf("%s=1 but Nova reports no hypervisor of type ironic (types %v): the cloud does not run Nova's Ironic driver", EnvNovaIronic, types)
	}
	return &NovaIronic{Config: cfg, Clients: c, Requests: rc, Hypervisors: ironicHV}
}

// RequestCounter counts HTTP requests by service and method.
type RequestCounter struct {
	mu       sync.Mutex
	byKey    map[string]int
	services map[string]string // host + path prefix → service name
}

// Wrap is an openstack.Config WrapTransport.
func (rc *RequestCounter) Wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rc.mu.Lock()
		if rc.byKey == nil {
			rc.byKey = map[string]int{}
		}
		rc.byKey[rc.serviceLocked(r.URL)+" "+r.Method]++
		rc.mu.Unlock()
		return next.RoundTrip(r)
	})
}

// name learns the service endpoints of c.
func (rc *RequestCounter) name(c *openstack.Clients) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.services = map[string]string{}
	add := func(name, endpoint string) {
		if u, err := url.Parse(endpoint); err == nil {
			rc.services[u.Host+strings.TrimSuffix(u.Path, "/")] = name
		}
	}
	add("ironic", c.Baremetal.Endpoint)
	if c.Placement != nil {
		add("placement", c.Placement.Endpoint)
	}
	if c.Compute != nil {
		add("nova", c.Compute.Endpoint)
	}
}

func (rc *RequestCounter) serviceLocked(u *url.URL) string {
	best, name := -1, u.Host
	for prefix, n := range rc.services {
		if strings.HasPrefix(u.Host+u.Path, prefix) && len(prefix) > best {
			best, name = len(prefix), n
		}
	}
	return name
}

// Snapshot returns the counts so far, keyed "service METHOD".
func (rc *RequestCounter) Snapshot() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]int, len(rc.byKey))
	for k, v := range rc.byKey {
		out[k] = v
	}
	return out
}

// Since returns the counts made after before (a Snapshot) and their total,
// rendered as "ironic GET=3 nova GET=1 (total 4)".
func (rc *RequestCounter) Since(before map[string]int) (string, int) {
	now := rc.Snapshot()
	var keys []string
	total := 0
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			keys = append(keys, k)
			total += d
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, now[k]-before[k])
	}
	fmt.Fprintf(&b, "(total %d)", total)
	return b.String(), total
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
