package auth

import (
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Test fixture: real keys (generated once per test binary), rendered into a
// roster with FormatRosterEntry exactly as `ironlink-hub keygen` prints it.

const testAudience = "https://hub.ironlink.test"

var (
	keyMu    sync.Mutex
	keyCache = map[string]crypto.Signer{}
)

// testKey returns the key named name (generated on first use with alg).
func testKey(t testing.TB, name, alg string) crypto.Signer {
	t.Helper()
	keyMu.Lock()
	defer keyMu.Unlock()
	if k, ok := keyCache[name]; ok {
		return k
	}
	k, err := GenerateKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	keyCache[name] = k
	return k
}

type fixtureKey struct {
	kid  string
	name string // keyCache name
	alg  string
}

type fixtureClient struct {
	id, site string
	scopes   []string
	keys     []fixtureKey
}

var (
	siteA = fixtureClient{"ironlink-agent-site-a", "site-a", []string{ScopeDeviceUpdate, ScopeDeviceConditionCreate},
		[]fixtureKey{{"a-es", "a-es", AlgES256}, {"a-ed", "a-ed", AlgEdDSA}}}
	siteB = fixtureClient{"ironlink-agent-site-b", "site-b", []string{ScopeDeviceUpdate, ScopeDeviceConditionCreate},
		[]fixtureKey{{"b-rs", "b-rs", AlgRS256}}}
	opsConsole = fixtureClient{"ops-console", "", []string{ScopeOperationsRead, ScopeOperationsWrite},
		[]fixtureKey{{"o-es", "o-es", AlgES256}}}
	opsReader = fixtureClient{"ops-reader", "", []string{ScopeOperationsRead},
		[]fixtureKey{{"r-ed", "r-ed", AlgEdDSA}}}
)

// rosterYAML renders clients as a roster document.
func rosterYAML(t testing.TB, clients ...fixtureClient) []byte {
	t.Helper()
	var sat, ops strings.Builder
	for _, c := range clients {
		for i, k := range c.keys {
			entry, err := FormatRosterEntry(c.id, c.site, c.scopes, k.kid, testKey(t, k.name, k.alg).Public())
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 { // further keys: keep only the key list item
				entry = entry[strings.Index(entry, "      - kid:"):]
			}
			b := &ops
			if c.site != "" {
				b = &sat
			}
			b.WriteString(entry)
		}
	}
	return []byte("satellites:\n" + orEmpty(sat.String()) + "operators:\n" + orEmpty(ops.String()))
}

func orEmpty(s string) string {
	if s == "" {
		return "  []\n"
	}
	return s
}

func mustRoster(t testing.TB, clients ...fixtureClient) *Roster {
	t.Helper()
	r, err := ParseRoster(rosterYAML(t, clients...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// signClaims signs arbitrary claims with key under alg and kid (kid "" = no
// kid header), for tokens Sign would never make.
func signClaims(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, claims map[string]any, headers map[jose.HeaderKey]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	for k, v := range headers {
		opts = opts.WithHeader(k, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsignedToken builds header.payload. with an empty signature (alg none).
func unsignedToken(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// claimsFor returns valid assertion claims for client at now.
func claimsFor(client string, now time.Time, lifetime time.Duration) map[string]any {
	return map[string]any{
		"iss": client, "sub": client, "aud": testAudience,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(lifetime).Unix(),
		"jti": rand.Text(),
	}
}
