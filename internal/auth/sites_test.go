package auth

import (
	"slices"
	"strings"
	"testing"
)

// operatorDoc is a roster with one operator (key o-es) whose entry carries
// extra (for example "    sites: [site-a]\n").
func operatorDoc(t *testing.T, extra string) string {
	return "operators:\n  - clientId: ops-a\n" + extra + "    scopes: [operations:read, operations:write]\n" +
		"    keys:\n      - kid: k1\n        publicKeyPEM: |\n" + indentPEM(pemOf(t, "o-es", AlgES256))
}

func TestOperatorSites(t *testing.T) {
	tests := []struct {
		name    string
		extra   string
		want    []string // nil: every site
		wantErr string
	}{
		{"absent: every site", "", nil, ""},
		{"bound to two sites", "    sites: [site-a, site-b]\n", []string{"site-a", "site-b"}, ""},
		{"empty list refused", "    sites: []\n", nil, "sites is empty"},
		{"invalid site name refused", "    sites: [Site_A]\n", nil, `sites: "Site_A" is invalid`},
		{"duplicate refused", "    sites: [site-a, site-a]\n", nil, "sites: site-a listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRoster([]byte(operatorDoc(t, tc.extra)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "operators[0] ops-a") {
					t.Fatalf("err = %v, want one naming operators[0] ops-a and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := r.Client("ops-a")
			if (c.Sites == nil) != (tc.want == nil) || !slices.Equal(c.Sites, tc.want) {
				t.Fatalf("Sites = %#v, want %#v", c.Sites, tc.want)
			}
		})
	}
}

func TestSatelliteWithSitesRefused(t *testing.T) {
	doc := "satellites:\n  - clientId: ironlink-agent-site-a\n    site: site-a\n    sites: [site-b]\n    scopes: [device:update]\n" +
		"    keys:\n      - kid: k1\n        publicKeyPEM: |\n" + indentPEM(pemOf(t, "a-es", AlgES256))
	if _, err := ParseRoster([]byte(doc)); err == nil || !strings.Contains(err.Error(), "sites is for operators") {
		t.Fatalf("err = %v", err)
	}
}

func TestIdentityAllowsSite(t *testing.T) {
	tests := []struct {
		name  string
		id    Identity
		site  string
		want  bool
		bound bool
	}{
		{"operator without sites: any site", Identity{ClientID: "ops"}, "site-z", true, false},
		{"operator bound: its site", Identity{ClientID: "ops", Sites: []string{"site-a"}}, "site-a", true, true},
		{"operator bound: another site", Identity{ClientID: "ops", Sites: []string{"site-a"}}, "site-b", false, true},
		{"satellite: its site", Identity{ClientID: "ironlink-agent-site-a", Site: "site-a"}, "site-a", true, true},
		{"satellite: another site", Identity{ClientID: "ironlink-agent-site-a", Site: "site-a"}, "site-b", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.id.AllowsSite(tc.site); got != tc.want {
				t.Fatalf("AllowsSite(%q) = %v, want %v", tc.site, got, tc.want)
			}
			if got := tc.id.SiteBound(); got != tc.bound {
				t.Fatalf("SiteBound() = %v, want %v", got, tc.bound)
			}
		})
	}
}

// TestRemovedNamesOperatorThatLostSites: narrowing an operator's sites is a
// loss of access, widening is not.
func TestRemovedNamesOperatorThatLostSites(t *testing.T) {
	parse := func(extra string) *Roster {
		r, err := ParseRoster([]byte(operatorDoc(t, extra)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	all, ab, a := parse(""), parse("    sites: [site-a, site-b]\n"), parse("    sites: [site-a]\n")
	tests := []struct {
		name     string
		old, new *Roster
		lost     bool
	}{
		{"every site → two", all, ab, true},
		{"two → one", ab, a, true},
		{"one → two", a, ab, false},
		{"two → every site", ab, all, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := slices.Contains(Removed(tc.old, tc.new), "ops-a"); got != tc.lost {
				t.Fatalf("Removed names ops-a: %v, want %v", got, tc.lost)
			}
		})
	}
}

// TestChartValuesSiteBoundOperator: the chart's example of an operator bound
// to one site parses as such.
func TestChartValuesSiteBoundOperator(t *testing.T) {
	r, err := LoadRoster("../../deploy/charts/hub/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Client("ops-site-a"); c == nil || !slices.Equal(c.Sites, []string{"site-a"}) {
		t.Fatalf("ops-site-a = %+v", c)
	}
	if c := r.Client("ops-console"); c == nil || c.Sites != nil {
		t.Fatalf("ops-console = %+v, want every site", c)
	}
}
