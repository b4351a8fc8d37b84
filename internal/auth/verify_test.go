package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

var t0 = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)

func newVerifier(r *Roster, now time.Time) *Verifier {
	return &Verifier{
		Roster:   func() *Roster { return r },
		Audience: testAudience,
		Replay:   &MemoryReplayCache{Now: func() time.Time { return now }},
		Now:      func() time.Time { return now },
	}
}

func TestVerify(t *testing.T) {
	roster := mustRoster(t, siteA, siteB, opsConsole, opsReader)
	aES := testKey(t, "a-es", AlgES256)
	aED := testKey(t, "a-ed", AlgEdDSA)
	bRS := testKey(t, "b-rs", AlgRS256)
	oES := testKey(t, "o-es", AlgES256)
	strangerES := testKey(t, "stranger-es", AlgES256)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	aPub, err := PublicKeyPEM(aES)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(key crypto.Signer, kid, client string, lifetime time.Duration, at time.Time) string {
		tok, err := Sign(key, kid, client, testAudience, lifetime, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	valid := sign(aES, "a-es", siteA.id, 2*time.Minute, t0)

	tests := []struct {
		name    string
		token   string
		check   string // "" = accepted
		client  string
		site    string
		kid     string
		replays bool // verify the token twice; the second must be a replay
	}{
		{name: "ES256 satellite", token: valid, client: siteA.id, site: "site-a", kid: "a-es", replays: true},
		{name: "EdDSA second key of the same client", token: sign(aED, "a-ed", siteA.id, time.Minute, t0), client: siteA.id, site: "site-a", kid: "a-ed"},
		{name: "RS256 satellite", token: sign(bRS, "b-rs", siteB.id, time.Minute, t0), client: siteB.id, site: "site-b", kid: "b-rs"},
		{name: "ES256 operator", token: sign(oES, "o-es", opsConsole.id, 5*time.Minute, t0), client: opsConsole.id, kid: "o-es"},
		{name: "aud as an array", token: signClaims(t, oES, jose.ES256, "o-es", with(claimsFor(opsConsole.id, t0, time.Minute), "aud", []string{"other", testAudience}), nil), client: opsConsole.id, kid: "o-es"},
		{name: "expired within leeway", token: sign(aES, "a-es", siteA.id, time.Minute, t0.Add(-time.Minute-20*time.Second)), client: siteA.id, site: "site-a", kid: "a-es"},
		{name: "issued slightly in the future (skew)", token: sign(aES, "a-es", siteA.id, time.Minute, t0.Add(20*time.Second)), client: siteA.id, site: "site-a", kid: "a-es"},
		{name: "no nbf", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "nbf", nil), nil), client: siteA.id, site: "site-a", kid: "a-es"},

		{name: "no token", token: "", check: CheckMissing},
		{name: "garbage", token: "not a jwt", check: CheckMalformed},
		{name: "two parts", token: "eyJhbGciOiJFUzI1NiJ9.e30", check: CheckMalformed},
		{name: "oversized", token: strings.Repeat("a", MaxTokenBytes+1), check: CheckMalformed},
		{name: "JSON serialization", token: `{"payload":"e30","signatures":[]}`, check: CheckMalformed},
		{name: "expired", token: sign(aES, "a-es", siteA.id, 2*time.Minute, t0.Add(-10*time.Minute)), check: CheckExpired},
		{name: "not yet valid (iat in the future)", token: sign(aES, "a-es", siteA.id, 2*time.Minute, t0.Add(5*time.Minute)), check: CheckNotYetValid},
		{name: "not yet valid (nbf in the future)", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, 4*time.Minute), "nbf", t0.Add(2*time.Minute).Unix()), nil), check: CheckNotYetValid},
		{name: "wrong audience", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "aud", "https://other.example"), nil), check: CheckAudience},
		{name: "no audience", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "aud", nil), nil), check: CheckAudience},
		{name: "unknown client", token: sign(strangerES, "s-es", "ironlink-agent-nowhere", time.Minute, t0), check: CheckUnknownClient},
		{name: "iss differs from sub", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "sub", siteB.id), nil), check: CheckUnknownClient},
		{name: "no iss", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "iss", nil, "sub", nil), nil), check: CheckUnknownClient},
		{name: "unknown kid", token: sign(aES, "a-rotated-away", siteA.id, time.Minute, t0), check: CheckUnknownKID},
		{name: "kid of another client", token: sign(bRS, "b-rs", siteA.id, time.Minute, t0), check: CheckUnknownKID},
		{name: "no kid", token: signClaims(t, aES, jose.ES256, "", claimsFor(siteA.id, t0, time.Minute), nil), check: CheckUnknownKID},
		{name: "signed by another client's key", token: sign(oES, "a-es", siteA.id, time.Minute, t0), check: CheckSignature},
		{name: "signed by a stranger's key", token: sign(strangerES, "a-es", siteA.id, time.Minute, t0), check: CheckSignature},
		{name: "embedded jwk header is ignored", token: signClaims(t, strangerES, jose.ES256, "a-es", claimsFor(siteA.id, t0, time.Minute),
			map[jose.HeaderKey]any{"jwk": jose.JSONWebKey{Key: strangerES.Public()}}), check: CheckSignature},
		{name: "tampered payload", token: tamper(valid), check: CheckSignature},
		{name: "alg none", token: unsignedToken(t, map[string]any{"alg": "none", "kid": "a-es", "typ": "JWT"}, claimsFor(siteA.id, t0, time.Minute)), check: CheckAlgorithm},
		{name: "alg None", token: unsignedToken(t, map[string]any{"alg": "None", "kid": "a-es"}, claimsFor(siteA.id, t0, time.Minute)), check: CheckAlgorithm},
		{name: "HS256 keyed with the public key PEM", token: signClaims(t, []byte(aPub), jose.HS256, "a-es", claimsFor(siteA.id, t0, time.Minute), nil), check: CheckAlgorithm},
		{name: "RS256 header on an ES256 kid", token: signClaims(t, bRS, jose.RS256, "a-es", claimsFor(siteA.id, t0, time.Minute), nil), check: CheckAlgorithm},
		{name: "EdDSA header on an ES256 kid", token: signClaims(t, aED, jose.EdDSA, "a-es", claimsFor(siteA.id, t0, time.Minute), nil), check: CheckAlgorithm},
		{name: "ES384", token: signClaims(t, p384, jose.ES384, "a-es", claimsFor(siteA.id, t0, time.Minute), nil), check: CheckAlgorithm},
		{name: "PS256", token: signClaims(t, bRS, jose.PS256, "b-rs", claimsFor(siteB.id, t0, time.Minute), nil), check: CheckAlgorithm},
		{name: "lifetime too long", token: sign(aES, "a-es", siteA.id, 10*time.Minute, t0), check: CheckLifetime},
		{name: "lifetime too long (a century)", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "exp", t0.AddDate(100, 0, 0).Unix()), nil), check: CheckLifetime},
		{name: "absurd exp", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "exp", int64(1)<<62), nil), check: CheckMalformed},
		{name: "no exp", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "exp", nil), nil), check: CheckMalformed},
		{name: "no iat", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "iat", nil), nil), check: CheckMalformed},
		{name: "exp before iat", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "exp", t0.Add(-time.Second).Unix()), nil), check: CheckMalformed},
		{name: "negative iat", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "iat", -5), nil), check: CheckMalformed},
		{name: "no jti", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "jti", nil), nil), check: CheckMalformed},
		{name: "jti with a NUL", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "jti", "a\x00b"), nil), check: CheckMalformed},
		{name: "jti too long", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "jti", strings.Repeat("j", MaxJTIBytes+1)), nil), check: CheckMalformed},
		{name: "exp as a string", token: signClaims(t, aES, jose.ES256, "a-es", with(claimsFor(siteA.id, t0, time.Minute), "exp", "soon"), nil), check: CheckMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(roster, t0)
			id, err := v.Verify(context.Background(), tc.token)
			if tc.check == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if id.ClientID != tc.client || id.Site != tc.site || id.KeyID != tc.kid {
					t.Fatalf("identity = %+v, want client %s site %q kid %s", id, tc.client, tc.site, tc.kid)
				}
				want := roster.Client(tc.client).Scopes
				if !slices.Equal(id.Scopes, want) || !id.HasScope(want[0]) {
					t.Fatalf("scopes = %v, want %v", id.Scopes, want)
				}
				if tc.replays {
					_, err := v.Verify(context.Background(), tc.token)
					assertCheck(t, err, CheckReplay, tc.token)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %+v, want %q", id, tc.check)
			}
			assertCheck(t, err, tc.check, tc.token)
		})
	}
}

// assertCheck fails unless err is a *VerifyError for check whose message
// names it and leaks neither the token nor any key material.
func assertCheck(t *testing.T, err error, check, token string) {
	t.Helper()
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v (%T), want *VerifyError %q", err, err, check)
	}
	if ve.Check != check {
		t.Fatalf("check = %q (%v), want %q", ve.Check, err, check)
	}
	if !errors.Is(err, &VerifyError{Check: check}) || !strings.Contains(err.Error(), check) {
		t.Fatalf("error %q does not name check %q", err, check)
	}
	assertNoSecrets(t, err.Error(), token)
}

func assertNoSecrets(t *testing.T, msg, token string) {
	t.Helper()
	if len(msg) > 300 {
		t.Errorf("message is %d bytes long: %q", len(msg), msg)
	}
	if token != "" {
		for _, part := range strings.Split(token, ".") {
			if len(part) >= 16 && strings.Contains(msg, part[:16]) {
				t.Errorf("message %q contains part of the token", msg)
			}
		}
	}
	keyMu.Lock()
	defer keyMu.Unlock()
	for name, k := range keyCache {
		p, err := PublicKeyPEM(k)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(p, "\n") {
			if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line[:16]) {
				t.Errorf("message %q contains key material of %s", msg, name)
			}
		}
	}
}

// tamper replaces the jti of a signed token, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		panic(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		panic(err)
	}
	claims["jti"] = "forged-" + rand.Text()
	raw, _ = json.Marshal(claims)
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
}

func TestVerifyLifetimeAndLeewayConfigurable(t *testing.T) {
	roster := mustRoster(t, siteA)
	key := testKey(t, "a-es", AlgES256)
	v := newVerifier(roster, t0)
	v.MaxLifetime, v.Leeway = 30*time.Second, time.Second
	tok, _ := Sign(key, "a-es", siteA.id, testAudience, time.Minute, t0)
	_, err := v.Verify(context.Background(), tok)
	assertCheck(t, err, CheckLifetime, tok)
	tok, _ = Sign(key, "a-es", siteA.id, testAudience, 20*time.Second, t0.Add(-25*time.Second))
	_, err = v.Verify(context.Background(), tok)
	assertCheck(t, err, CheckExpired, tok)
	tok, _ = Sign(key, "a-es", siteA.id, testAudience, 20*time.Second, t0.Add(-20*time.Second))
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("token at the edge of its lifetime (within 1s leeway): %v", err)
	}
}

// A key rotation: both kids valid at once, then the old one removed from the
// roster — its (otherwise valid, fresh) tokens are refused from then on.
func TestVerifyKeyRotation(t *testing.T) {
	oldKey := fixtureKey{"2026-11", "rot-old", AlgES256}
	newKey := fixtureKey{"2027-05", "rot-new", AlgEdDSA}
	both := fixtureClient{siteA.id, siteA.site, siteA.scopes, []fixtureKey{oldKey, newKey}}
	only := fixtureClient{siteA.id, siteA.site, siteA.scopes, []fixtureKey{newKey}}
	var cur atomic.Pointer[Roster]
	before := mustRoster(t, both)
	cur.Store(before)
	v := newVerifier(nil, t0)
	v.Roster = cur.Load
	tok := func(k fixtureKey) string {
		s, err := Sign(testKey(t, k.name, k.alg), k.kid, siteA.id, testAudience, time.Minute, t0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, k := range []fixtureKey{oldKey, newKey} {
		id, err := v.Verify(context.Background(), tok(k))
		if err != nil || id.KeyID != k.kid {
			t.Fatalf("during rotation, kid %s: %+v %v", k.kid, id, err)
		}
	}
	after := mustRoster(t, only)
	if got := Removed(before, after); !slices.Equal(got, []string{siteA.id + "/2026-11"}) {
		t.Fatalf("Removed = %v", got)
	}
	oldID := Identity{ClientID: siteA.id, Site: "site-a", KeyID: "2026-11"}
	if !before.StillAuthorized(oldID, ScopeDeviceConditionCreate) || after.StillAuthorized(oldID, ScopeDeviceConditionCreate) {
		t.Fatal("StillAuthorized does not follow the rotation")
	}
	cur.Store(after)
	old := tok(oldKey)
	_, err := v.Verify(context.Background(), old)
	assertCheck(t, err, CheckUnknownKID, old)
	if _, err := v.Verify(context.Background(), tok(newKey)); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
}

type failingCache struct{}

func (failingCache) Remember(context.Context, string, string, time.Duration) (bool, error) {
	return false, errors.New("database is down")
}

func TestVerifyReplayCacheFailureFailsClosed(t *testing.T) {
	v := newVerifier(mustRoster(t, siteA), t0)
	v.Replay = failingCache{}
	tok, _ := Sign(testKey(t, "a-es", AlgES256), "a-es", siteA.id, testAudience, time.Minute, t0)
	_, err := v.Verify(context.Background(), tok)
	var ve *VerifyError
	if err == nil || errors.As(err, &ve) || !strings.Contains(err.Error(), "database is down") {
		t.Fatalf("err = %v, want a plain wrapped cache error", err)
	}
}

func TestVerifyMisconfigured(t *testing.T) {
	for _, v := range []*Verifier{
		{Audience: testAudience, Replay: &MemoryReplayCache{}},
		{Roster: func() *Roster { return nil }, Audience: testAudience, Replay: &MemoryReplayCache{}},
		{Roster: func() *Roster { return mustRoster(t, siteA) }, Replay: &MemoryReplayCache{}},
		{Roster: func() *Roster { return mustRoster(t, siteA) }, Audience: testAudience},
	} {
		tok, _ := Sign(testKey(t, "a-es", AlgES256), "a-es", siteA.id, testAudience, time.Minute, time.Now())
		_, err := v.Verify(context.Background(), tok)
		var ve *VerifyError
		if err == nil || errors.As(err, &ve) {
			t.Fatalf("misconfigured verifier: err = %v", err)
		}
	}
}

func TestMemoryReplayCacheExpires(t *testing.T) {
	now := t0
	c := &MemoryReplayCache{Now: func() time.Time { return now }}
	ctx := context.Background()
	if r, _ := c.Remember(ctx, "a", "j", time.Minute); r {
		t.Fatal("first use reported as replay")
	}
	if r, _ := c.Remember(ctx, "b", "j", time.Minute); r {
		t.Fatal("same jti of another client reported as replay")
	}
	if r, _ := c.Remember(ctx, "a", "j", time.Minute); !r {
		t.Fatal("replay not detected")
	}
	now = t0.Add(2 * time.Minute)
	if r, _ := c.Remember(ctx, "x", "y", time.Minute); r || c.Len() != 1 {
		t.Fatalf("expired entries not purged: len %d", c.Len())
	}
}
