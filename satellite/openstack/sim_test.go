package openstack_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

func connect(t *testing.T, cfg openstack.Config) (*openstack.Clients, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return openstack.Connect(ctx, cfg, ostest.Logger(t))
}

func TestSimConnect(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{})
	c, err := connect(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.IronicVersion != "1.65" || c.Baremetal.Microversion != "1.65" || c.PlacementVersion != "1.39" || c.Placement.Microversion != "1.39" {
		t.Errorf("versions %s/%s %s/%s", c.IronicVersion, c.Baremetal.Microversion, c.PlacementVersion, c.Placement.Microversion)
	}
	if c.Standalone() || !strings.HasPrefix(c.Baremetal.Endpoint, sim.URL()) {
		t.Errorf("clients %+v", c)
	}
	for _, mode := range []string{"on", "ON", ""} {
		cfg.Placement = mode
		if c, err := connect(t, cfg); err != nil || c.Placement == nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	cfg.Placement = "off"
	if c, err := connect(t, cfg); err != nil || c.Placement != nil || c.PlacementVersion != "" {
		t.Errorf("mode off: %+v %v", c, err)
	}
	cfg.Placement = "maybe"
	if _, err := connect(t, cfg); err == nil {
		t.Error("bad mode accepted")
	}
}

func TestSimConnectStandalone(t *testing.T) {
	_, cfg := ostest.StartSim(t, openstacksim.Options{NoPlacement: true})
	c, err := connect(t, cfg)
	if err != nil || c.Placement != nil || !c.Standalone() {
		t.Fatalf("auto on a site without placement: %+v %v", c, err)
	}
	cfg.Placement = openstack.PlacementOn
	if _, err := connect(t, cfg); err == nil {
		t.Fatal("placement=on without placement in the catalog succeeded")
	}
}

func TestSimConnectNegotiation(t *testing.T) {
	for _, tc := range []struct {
		ironic, placement string
		wantI, wantP      string
		fail              bool
	}{
		{"1.82", "1.39", "1.65", "1.39", false},
		{"1.50", "1.20", "1.50", "1.20", false},
		{"1.37", "1.6", "1.37", "1.6", false},
		{"1.36", "1.39", "", "", true},
		{"1.82", "1.5", "", "", true},
	} {
		_, cfg := ostest.StartSim(t, openstacksim.Options{IronicMaxVersion: tc.ironic, PlacementMaxVersion: tc.placement})
		c, err := connect(t, cfg)
		if tc.fail {
			if err == nil {
				t.Errorf("ironic %s placement %s: accepted", tc.ironic, tc.placement)
			} else {
				t.Logf("ironic %s placement %s: %v", tc.ironic, tc.placement, err)
			}
			continue
		}
		if err != nil || c.IronicVersion != tc.wantI || c.PlacementVersion != tc.wantP {
			t.Errorf("ironic %s placement %s: got %+v %v", tc.ironic, tc.placement, c, err)
		}
	}
}

func TestSimConnectBadCredential(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{})
	_, secret := sim.ApplicationCredential()
	b, err := os.ReadFile(cfg.CloudsYAML)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(bad, []byte(strings.ReplaceAll(string(b), secret, "wrong")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.CloudsYAML = bad
	_, err = connect(t, cfg)
	if err == nil || !openstack.IsAuthError(err) {
		t.Fatalf("wrong secret: %v (auth error: %v)", err, openstack.IsAuthError(err))
	}
	t.Logf("wrong secret: %v", err)

	cfg.Cloud = "nope"
	if _, err := connect(t, cfg); err == nil {
		t.Error("unknown cloud accepted")
	}
	cfg.CloudsYAML = filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := connect(t, cfg); err == nil {
		t.Error("missing clouds.yaml accepted")
	}
}

// The Ironic version document is unavailable for a moment: Connect retries.
func TestSimConnectRetriesVersionDocument(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{})
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: "GET", Status: 503, Times: 2})
	if _, err := connect(t, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestRealConnect connects to the real cloud (gated by environment).
func TestRealConnect(t *testing.T) {
	c := ostest.RealCloud(t)
	t.Logf("ironic %s at %s, placement %q, token expires %s, reauth margin %s",
		c.IronicVersion, c.Baremetal.Endpoint, c.PlacementVersion, c.Provider.TokenExpiry(), c.Provider.ReauthBeforeTokenExpiration)
	if c.IronicVersion == "" {
		t.Fatal("no ironic version")
	}
}
