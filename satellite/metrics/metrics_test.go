package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/satellite/metrics"
)

// Requests are counted per service by endpoint prefix; the site condition
// gauge holds only the current status of each type; /metrics serves it all.
func TestMetricsServeWhatHappened(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "missing") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer backend.Close()
	m := metrics.New()
	m.SetEndpoints(map[string]string{"baremetal": backend.URL + "/baremetal/", "compute": backend.URL + "/compute/v2.1/"})
	m.SetStats(func() metrics.Stats { return metrics.Stats{Polls: 7, InstanceMismatches: 2} })
	c := &http.Client{Transport: m.Transport(nil)}
	for _, p := range []string{"/baremetal/v1/nodes", "/baremetal/v1/nodes?limit=1", "/compute/v2.1/servers/missing", "/elsewhere"} {
		resp, err := c.Get(backend.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := requests(t, m, "baremetal"); n != 2 {
		t.Errorf("baremetal requests %d, want 2", n)
	}
	if n := requests(t, m, ""); n != 4 {
		t.Errorf("all requests %d, want 4", n)
	}
	m.SiteCondition(condition.Condition{Type: condition.OpenStackAuthenticated, Status: condition.False, Reason: "AuthenticationFailed"})
	m.SiteCondition(condition.Condition{Type: condition.OpenStackAuthenticated, Status: condition.True, Reason: "Authenticated"})

	_, get := serve(t, m)
	_, body := get("/metrics")
	for _, want := range []string{
		`ironlink_satellite_openstack_requests_total{code="404",method="GET",service="compute"} 1`,
		`ironlink_satellite_openstack_requests_total{code="200",method="GET",service="other"} 1`,
		`ironlink_satellite_polls_total 7`,
		`ironlink_satellite_instance_mismatches 2`,
		`ironlink_satellite_site_condition{reason="Authenticated",status="True",type="OpenStackAuthenticated"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `reason="AuthenticationFailed"`) {
		t.Error("/metrics still shows the old site condition status")
	}
}

// requests sums ironlink_satellite_openstack_requests_total for service
// ("" for all services).
func requests(t *testing.T, m *metrics.Satellite, service string) int {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "ironlink_satellite_openstack_requests_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "service" && (service == "" || l.GetValue() == service) {
					n += mt.GetCounter().GetValue()
				}
			}
		}
	}
	return int(n)
}
