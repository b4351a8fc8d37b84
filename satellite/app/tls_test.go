package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/satellite/metrics"
	"github.com/ironlink/ironlink/satellite/openstack"

	"log/slog"
)

// An allowed verify: false is visible: site condition OpenStackTLSVerified
// False/VerifyDisabled, its metric, and a warning; a verifying cloud is
// True/Verified; a refused one Unknown/NotChecked.
func TestTLSVerificationCondition(t *testing.T) {
	cloud := "clouds:\n  c:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: https://keystone.example:5000/v3\n" +
		"      application_credential_id: id\n      application_credential_secret: s\n"
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	write := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	write(cloud + "    verify: false\n")
	c := tlsVerification(openstack.Config{CloudsYAML: path, Cloud: "c", AllowInsecureTLS: true}, log)
	if c.Type != condition.OpenStackTLSVerified || c.Status != condition.False || c.Reason != ReasonTLSVerifyDisabled {
		t.Fatalf("allowed verify: false: %+v", c)
	}
	if !strings.Contains(logs.String(), "TLS certificate verification towards OpenStack is OFF") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
	m := metrics.New()
	m.SiteCondition(c)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "ironlink_satellite_site_condition" {
			continue
		}
		for _, s := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range s.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["type"] == "OpenStackTLSVerified" && l["status"] == "False" && l["reason"] == "VerifyDisabled" && s.GetGauge().GetValue() == 1 {
				found = true
			}
		}
	}
	if !found {
		t.Fatal(`no ironlink_satellite_site_condition{type="OpenStackTLSVerified",status="False",reason="VerifyDisabled"} 1`)
	}
	if c := tlsVerification(openstack.Config{CloudsYAML: path, Cloud: "c"}, log); c.Status != condition.Unknown || c.Reason != ReasonTLSNotChecked {
		t.Fatalf("refused verify: false: %+v", c)
	}
	write(cloud)
	if c := tlsVerification(openstack.Config{CloudsYAML: path, Cloud: "c"}, log); c.Status != condition.True || c.Reason != ReasonTLSVerified {
		t.Fatalf("verifying cloud: %+v", c)
	}
}
