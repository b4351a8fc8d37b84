package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
)

// hwGet is GET /v1/nodes/{node}/{what} at microversion ver: the status,
// the body and the microversion headers Ironic answers with.
func (c *cloud) hwGet(t *testing.T, node, what, ver string) (int, []byte, http.Header) {
	t.Helper()
	bm := *c.bm
	bm.Microversion = ver
	resp, err := bm.Request(context.Background(), http.MethodGet, bm.ServiceURL("nodes", node, what), &gophercloud.RequestOpts{
		OkCodes: []int{200, 404, 406}, KeepResponseBody: true})
	if err != nil {
		t.Fatalf("GET %s of %s at %s: %v", what, node, ver, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// faultstring is the faultstring of an Ironic error body
// ({"error_message": "<JSON of {faultcode, faultstring, debuginfo}>"}).
func faultstring(t *testing.T, b []byte) string {
	t.Helper()
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if err := json.Unmarshal(b, &outer); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	var inner struct {
		Faultcode   string `json:"faultcode"`
		Faultstring string `json:"faultstring"`
	}
	if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil {
		return "(not a fault) " + outer.ErrorMessage
	}
	return inner.Faultcode + ": " + inner.Faultstring
}

// inventoryMissing is Ironic's faultstring for a node without an inventory.
var inventoryMissing = regexp.MustCompile(`^Client: Node inventory record for node [0-9]+ could not be found\.$`)

// checkHardwareEndpoints checks GET /v1/nodes/{node}/inventory (1.81) and
// /bios (1.40) the way ironlink's satellite reads them, on every node of
// c: an inventory is 200 {inventory, plugin_data} or 404 naming the node;
// BIOS settings are 200 {bios: [{name, value, links}]}; below the
// microversion both routes are 404; the answer carries the microversion
// it was served at (X-OpenStack-Ironic-API-Version, -Minimum-Version).
func checkHardwareEndpoints(t *testing.T, c *cloud) (withInventory, without int) {
	for _, n := range c.nodes(t) {
		code, b, h := c.hwGet(t, n.UUID, "inventory", "1.81")
		if got := h.Get("X-OpenStack-Ironic-API-Version"); got != "1.81" {
			t.Errorf("%s inventory: X-OpenStack-Ironic-API-Version %q, want 1.81", n.Name, got)
		}
		if got := h.Get("X-OpenStack-Ironic-API-Minimum-Version"); got != "1.1" {
			t.Errorf("%s inventory: X-OpenStack-Ironic-API-Minimum-Version %q, want 1.1", n.Name, got)
		}
		switch code {
		case http.StatusOK:
			var inv map[string]json.RawMessage
			if err := json.Unmarshal(b, &inv); err != nil || inv["inventory"] == nil || inv["plugin_data"] == nil || len(inv) != 2 {
				t.Errorf("%s inventory: %d keys (%v) of %.200s, want inventory and plugin_data", n.Name, len(inv), err, b)
			}
			withInventory++
		case http.StatusNotFound:
			// Ironic names the node by its internal id, not its UUID.
			if got := faultstring(t, b); !inventoryMissing.MatchString(got) {
				t.Errorf("%s inventory 404: %q, want %q", n.Name, got, inventoryMissing)
			}
			without++
		default:
			t.Errorf("%s inventory: %d %s", n.Name, code, b)
		}
		code, b, h = c.hwGet(t, n.UUID, "bios", "1.40")
		var bios struct {
			BIOS []map[string]json.RawMessage `json:"bios"`
		}
		if err := json.Unmarshal(b, &bios); code != http.StatusOK || err != nil || bios.BIOS == nil || h.Get("X-OpenStack-Ironic-API-Version") != "1.40" {
			t.Errorf("%s bios: %d %.200s (%v), version %q", n.Name, code, b, err, h.Get("X-OpenStack-Ironic-API-Version"))
		}
		for _, s := range bios.BIOS {
			if s["name"] == nil || s["value"] == nil || s["links"] == nil {
				t.Errorf("%s bios setting %v: want name, value, links", n.Name, s)
			}
		}
		for what, below := range map[string]string{"inventory": "1.80", "bios": "1.39"} {
			// A routing error: pecan's body, no microversion headers.
			code, b, h := c.hwGet(t, n.UUID, what, below)
			if code != http.StatusNotFound || string(b) != `{"error_message": "{\"code\": 404, \"title\": \"Not Found\", \"description\": \"\"}"}` ||
				h.Get("X-OpenStack-Ironic-API-Version") != "" {
				t.Errorf("%s %s at %s: %d %s (version %q), want pecan's 404 without microversion headers", n.Name, what, below, code, b, h.Get("X-OpenStack-Ironic-API-Version"))
			}
		}
	}
	return withInventory, without
}

// The simulator with the demo's hardware (SeedHardware): every node but
// those in enroll serves an inventory, the others 404 as Ironic does.
func TestHardwareEndpointsSimulator(t *testing.T) {
	c := simCloud(t)
	seeded := c.sim.SeedHardware(nil)
	with, without := checkHardwareEndpoints(t, c)
	if with != len(seeded) || without != len(c.nodes(t))-len(seeded) || without == 0 {
		t.Errorf("%d nodes with an inventory and %d without, want %d and the rest (> 0)", with, without, len(seeded))
	}
}

// The real cloud answers the same way (whatever inventories its seed stored).
func TestHardwareEndpointsRealCloud(t *testing.T) {
	c := realCloud(t)
	with, without := checkHardwareEndpoints(t, c)
	t.Logf("real cloud: %d nodes with an inventory, %d without", with, without)
}
