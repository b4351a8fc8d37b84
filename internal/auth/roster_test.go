package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// indentPEM indents a PEM for a YAML block scalar under "publicKeyPEM: |".
func indentPEM(p string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(p, "\n"), "\n") {
		b.WriteString("          " + l + "\n")
	}
	return b.String()
}

func pemOf(t *testing.T, name, alg string) string {
	t.Helper()
	p, err := PublicKeyPEM(testKey(t, name, alg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseRosterValid(t *testing.T) {
	r := mustRoster(t, siteA, siteB, opsConsole, opsReader)
	if got := len(r.Clients()); got != 4 {
		t.Fatalf("%d clients", got)
	}
	a := r.Client(siteA.id)
	if a == nil || a.Site != "site-a" || !a.IsSatellite() || len(a.Keys) != 2 || !a.HasScope(ScopeDeviceConditionCreate) || a.HasScope(ScopeOperationsRead) {
		t.Fatalf("site-a = %+v", a)
	}
	if k, ok := a.Key("a-ed"); !ok || k.Algorithm != AlgEdDSA {
		t.Fatalf("a-ed = %+v", k)
	}
	if k, _ := r.Client(siteB.id).Key("b-rs"); k.Algorithm != AlgRS256 {
		t.Fatalf("b-rs = %+v", k)
	}
	if o := r.Client("ops-console"); o == nil || o.IsSatellite() || !o.HasScope(ScopeOperationsWrite) {
		t.Fatalf("ops-console = %+v", o)
	}
	if r.Client("nobody") != nil {
		t.Fatal("unknown client found")
	}

	// A JWK, as a YAML map and as a JSON string, with its own kid.
	jwk, err := PublicJWK(testKey(t, "j-ed", AlgEdDSA), "j1")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(jwk), &m)
	rsaJWK, _ := json.Marshal(jose.JSONWebKey{Key: testKey(t, "b-rs", AlgRS256).Public()})
	doc := "image: {repository: x}\nsatellites: []\noperators:\n  - clientId: jwk-user\n    scopes: [operations:read]\n    keys:\n" +
		"      - jwk: " + jwk + "\n" +
		"      - kid: j2\n        jwk: '" + string(rsaJWK) + "'\n"
	r, err = ParseRoster([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := r.Client("jwk-user")
	if k1, ok := c.Key("j1"); !ok || k1.Algorithm != AlgEdDSA {
		t.Fatalf("j1 = %+v", k1)
	}
	if k2, ok := c.Key("j2"); !ok || k2.Algorithm != AlgRS256 {
		t.Fatalf("j2 = %+v", k2)
	}
}

// The example in the chart's values.yaml is a valid roster as it stands.
func TestChartValuesRoster(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "charts", "hub", "values.yaml")
	r, err := LoadRoster(path)
	if err != nil {
		t.Fatal(err)
	}
	sat := r.Client("ironlink-agent-site-a")
	if sat == nil || sat.Site != "site-a" || len(sat.Keys) != 2 {
		t.Fatalf("values.yaml satellite = %+v", sat)
	}
	if ops := r.Client("ops-console"); ops == nil || !ops.HasScope(ScopeOperationsWrite) {
		t.Fatalf("values.yaml operator = %+v", ops)
	}
}

func TestParseRosterErrors(t *testing.T) {
	aPEM := indentPEM(pemOf(t, "a-es", AlgES256))
	bPEM := indentPEM(pemOf(t, "b-rs", AlgRS256))
	short, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	shortDER, _ := x509.MarshalPKIXPublicKey(&short.PublicKey)
	shortPEM := indentPEM(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: shortDER})))
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	p384PEM := indentPEM(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: p384DER})))
	privJWK, _ := json.Marshal(jose.JSONWebKey{Key: testKey(t, "a-ed", AlgEdDSA), KeyID: "p"})
	edJWK, _ := PublicJWK(testKey(t, "a-ed", AlgEdDSA), "jk")
	privPEM, _ := MarshalPrivateKeyPEM(testKey(t, "a-es", AlgES256))

	sat := func(id, site, scopes, keys string) string {
		s := "  - clientId: " + id + "\n"
		if site != "" {
			s += "    site: " + site + "\n"
		}
		return s + "    scopes: [" + scopes + "]\n    keys:\n" + keys
	}
	key := func(kid, pemBody string) string {
		return "      - kid: " + kid + "\n        publicKeyPEM: |\n" + pemBody
	}
	sc := "device:update, device-condition:create"
	tests := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"no sections", "image: {tag: dev}\n", []string{"no satellites: or operators: section"}},
		{"not YAML", "satellites: [\n", []string{"parse YAML"}},
		{"unknown field", "satellites:\n  - clientId: ironlink-agent-x\n    site: x\n    scope: [device:update]\n", []string{"field scope not found"}},
		{"duplicate client", "satellites:\n" + sat("ironlink-agent-a", "a", sc, key("k1", aPEM)) + sat("ironlink-agent-a", "a", sc, key("k2", bPEM)),
			[]string{"satellites[1] ironlink-agent-a: duplicate client id"}},
		{"satellite without site", "satellites:\n" + sat("ironlink-agent-a", "", sc, key("k1", aPEM)), []string{"site is required"}},
		{"invalid site", "satellites:\n" + sat("ironlink-agent-Site_A", "Site_A", sc, key("k1", aPEM)), []string{`site "Site_A" is invalid`}},
		{"site with leading dash", "satellites:\n" + sat("ironlink-agent--a", "-a", sc, key("k1", aPEM)), []string{`site "-a" is invalid`}},
		{"satellite misnamed", "satellites:\n" + sat("agent-a", "a", sc, key("k1", aPEM)), []string{"must be named ironlink-agent-a"}},
		{"satellite of another site's name", "satellites:\n" + sat("ironlink-agent-b", "a", sc, key("k1", aPEM)), []string{"must be named ironlink-agent-a"}},
		{"unknown scope", "satellites:\n" + sat("ironlink-agent-a", "a", "device:delete", key("k1", aPEM)), []string{`unknown scope "device:delete"`}},
		{"scope twice", "operators:\n" + sat("ops", "", "operations:read, operations:read", key("k1", aPEM)), []string{"listed twice"}},
		{"operator with a site scope", "operators:\n" + sat("ops", "", "device-condition:create", key("k1", aPEM)), []string{"only satellites may hold it"}},
		{"operator with a site", "operators:\n" + sat("ops", "a", "operations:read", key("k1", aPEM)), []string{"an operator has no site"}},
		{"operator named like a satellite", "operators:\n" + sat("ironlink-agent-x", "", "operations:read", key("k1", aPEM)), []string{"reserved for satellites"}},
		{"bad client id", "operators:\n" + sat("'ops console'", "", "operations:read", key("k1", aPEM)), []string{`clientId "ops console" is invalid`}},
		{"no client id", "operators:\n" + sat("''", "", "operations:read", key("k1", aPEM)), []string{"clientId is required"}},
		{"garbage PEM", "operators:\n" + sat("ops", "", "operations:read", key("k1", "          not a key\n")), []string{`kid "k1": bad publicKeyPEM: no PEM block`}},
		{"private key PEM", "operators:\n" + sat("ops", "", "operations:read", key("k1", indentPEM(string(privPEM)))), []string{`want PUBLIC KEY`}},
		{"RSA 1024", "operators:\n" + sat("ops", "", "operations:read", key("k1", shortPEM)), []string{"RSA key of 1024 bits"}},
		{"P-384", "operators:\n" + sat("ops", "", "operations:read", key("k1", p384PEM)), []string{"only P-256"}},
		{"duplicate kid", "operators:\n" + sat("ops", "", "operations:read", key("k1", aPEM)+key("k1", bPEM)), []string{`duplicate kid "k1"`}},
		{"same key twice", "operators:\n" + sat("ops", "", "operations:read", key("k1", aPEM)+key("k2", aPEM)), []string{`already listed as kid "k1"`}},
		{"one key for two clients", "satellites:\n" + sat("ironlink-agent-a", "a", sc, key("k1", aPEM)) + "operators:\n" + sat("ops", "", "operations:read", key("k9", aPEM)),
			[]string{"already registered as ironlink-agent-a"}},
		{"no kid", "operators:\n" + sat("ops", "", "operations:read", "      - publicKeyPEM: |\n"+aPEM), []string{"kid is required"}},
		{"bad kid", "operators:\n" + sat("ops", "", "operations:read", key("'k 1'", aPEM)), []string{`kid "k 1" is invalid`}},
		{"no key material", "operators:\n" + sat("ops", "", "operations:read", "      - kid: k1\n"), []string{"publicKeyPEM or jwk is required"}},
		{"PEM and JWK", "operators:\n" + sat("ops", "", "operations:read", key("k1", aPEM)+"        jwk: "+edJWK+"\n"), []string{"not both"}},
		{"private JWK", "operators:\n" + sat("ops", "", "operations:read", "      - kid: p\n        jwk: '"+string(privJWK)+"'\n"), []string{"jwk holds a private key"}},
		{"JWK kid mismatch", "operators:\n" + sat("ops", "", "operations:read", "      - kid: other\n        jwk: "+edJWK+"\n"), []string{`the jwk says kid "jk"`}},
		{"JWK alg mismatch", "operators:\n" + sat("ops", "", "operations:read", "      - jwk: "+strings.Replace(edJWK, `"alg":"EdDSA"`, `"alg":"ES256"`, 1)+"\n"), []string{`jwk alg "ES256" does not match`}},
		{"JWK garbage", "operators:\n" + sat("ops", "", "operations:read", "      - kid: g\n        jwk: '{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}'\n"), []string{`kid "g": bad jwk`}},
		{"several problems at once", "satellites:\n" + sat("ironlink-agent-a", "", sc, key("k1", aPEM)) + "operators:\n" + sat("ops", "", "nope", key("k2", bPEM)),
			[]string{"site is required", `unknown scope "nope"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRoster([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			assertNoSecrets(t, err.Error(), "")
			for _, line := range strings.Split(string(privJWK)+string(privPEM)+shortPEM+p384PEM, "\n") {
				if l := strings.TrimSpace(line); len(l) > 20 && !strings.HasPrefix(l, "-----") && strings.Contains(err.Error(), l[:20]) {
					t.Errorf("error leaks key material: %q", err)
				}
			}
		})
	}
}

func TestLoadRosterNamesFile(t *testing.T) {
	_, err := LoadRoster(filepath.Join(t.TempDir(), "missing.yaml"))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("err = %v", err)
	}
}

// TestLoadRosterRefusesAnEndlessFile: a roster path pointing at the wrong
// file (here a device that never ends) is a clear error, not a hub that reads
// until it runs out of memory.
func TestLoadRosterRefusesAnEndlessFile(t *testing.T) {
	_, err := LoadRoster("/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "/dev/zero") || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("err = %v", err)
	}
}

func TestRemoved(t *testing.T) {
	old := mustRoster(t, siteA, siteB, opsConsole, opsReader)
	lessScope := opsConsole
	lessScope.scopes = []string{ScopeOperationsRead}
	oneKey := siteA
	oneKey.keys = siteA.keys[1:]
	newR := mustRoster(t, oneKey, lessScope, opsReader)
	got := Removed(old, newR)
	want := []string{siteA.id + "/a-es", siteB.id, "ops-console"}
	if !slices.Equal(got, want) {
		t.Fatalf("Removed = %v, want %v", got, want)
	}
	if got := Removed(old, old); len(got) != 0 {
		t.Fatalf("Removed(same) = %v", got)
	}
	if got := Removed(nil, old); len(got) != 0 {
		t.Fatalf("Removed(nil, r) = %v", got)
	}
	if got := Removed(old, nil); len(got) != 4 {
		t.Fatalf("Removed(r, nil) = %v", got)
	}
	id := Identity{ClientID: "ops-console", KeyID: "o-es"}
	if !newR.StillAuthorized(id, ScopeOperationsRead) || newR.StillAuthorized(id, ScopeOperationsWrite) {
		t.Fatal("StillAuthorized ignores the scope change")
	}
	if newR.StillAuthorized(Identity{ClientID: siteB.id, Site: "site-b", KeyID: "b-rs"}, "") {
		t.Fatal("removed client still authorized")
	}
}

func TestFormatRosterEntryRoundTrip(t *testing.T) {
	for _, alg := range Algorithms {
		k := testKey(t, "fmt-"+alg, alg)
		tp, err := Thumbprint(k)
		if err != nil || len(tp) != 43 {
			t.Fatalf("thumbprint %q %v", tp, err)
		}
		e, err := FormatRosterEntry("ironlink-agent-x", "x", []string{ScopeDeviceConditionCreate}, tp, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseRoster([]byte("satellites:\n" + e))
		if err != nil {
			t.Fatalf("%s entry does not parse: %v\n%s", alg, err, e)
		}
		got, ok := r.Client("ironlink-agent-x").Key(tp)
		if !ok || got.Algorithm != alg || !sameKey(got.Public, k.Public()) {
			t.Fatalf("%s: key = %+v", alg, got)
		}
	}
}

// A health checker is bound to its site as a satellite is and holds
// device-health:create only; its roster errors name the entry.
func TestParseRosterHealthCheckers(t *testing.T) {
	keys := "    keys:\n      - kid: k1\n        publicKeyPEM: |\n" + indentPEM(pemOf(t, "checker", "EdDSA"))
	good := "healthCheckers:\n  - clientId: gpu-mon-a\n    site: site-a\n    scopes: [device-health:create]\n" + keys
	r, err := ParseRoster([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	c := r.Client("gpu-mon-a")
	if c == nil || c.Site != "site-a" || c.Sites != nil || !slices.Equal(c.Scopes, []string{ScopeDeviceHealthCreate}) {
		t.Fatalf("checker client: %+v", c)
	}
	for name, tc := range map[string]struct{ entry, want string }{
		"no site":         {"  - clientId: gpu-mon-a\n    scopes: [device-health:create]\n", "site is required for a health checker"},
		"other scope":     {"  - clientId: gpu-mon-a\n    site: site-a\n    scopes: [device:update]\n", "a health checker holds device-health:create only"},
		"satellite id":    {"  - clientId: ironlink-agent-site-a\n    site: site-a\n    scopes: [device-health:create]\n", "reserved for satellites"},
		"operator's list": {"  - clientId: gpu-mon-a\n    site: site-a\n    sites: [site-a]\n    scopes: [device-health:create]\n", "sites is for operators"},
	} {
		_, err := ParseRoster([]byte("healthCheckers:\n" + tc.entry + keys))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "healthCheckers[0]") {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	_, err = ParseRoster([]byte("operators:\n  - clientId: ops\n    scopes: [device-health:create]\n" + keys))
	if err == nil || !strings.Contains(err.Error(), "only health checkers and satellites may hold it") {
		t.Errorf("operator with device-health:create: %v", err)
	}
}
