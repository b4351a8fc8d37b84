package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// FuzzVerify feeds arbitrary strings to the token parser and verifier. It
// must never panic, never accept a token that is not a roster client's, and
// refuse everything else with a *VerifyError of bounded size that does not
// echo the token.
//
//	go test ./internal/auth -run '^$' -fuzz FuzzVerify -fuzztime 60s
func FuzzVerify(f *testing.F) {
	roster := mustRoster(f, siteA, siteB, opsConsole)
	now := t0
	for _, c := range []struct{ name, alg, kid, client string }{
		{"a-es", AlgES256, "a-es", siteA.id}, {"a-ed", AlgEdDSA, "a-ed", siteA.id}, {"b-rs", AlgRS256, "b-rs", siteB.id},
	} {
		tok, err := Sign(testKey(f, c.name, c.alg), c.kid, c.client, testAudience, time.Minute, now)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
		parts := strings.Split(tok, ".")
		f.Add(parts[0] + "." + parts[1] + ".")
		f.Add(parts[0] + ".." + parts[2])
		f.Add(tok + ".")
	}
	pub, _ := PublicKeyPEM(testKey(f, "a-es", AlgES256))
	f.Add(signClaims(f, []byte(pub), jose.HS256, "a-es", claimsFor(siteA.id, now, time.Minute), nil))
	f.Add(unsignedToken(f, map[string]any{"alg": "none", "kid": "a-es"}, claimsFor(siteA.id, now, time.Minute)))
	f.Add(unsignedToken(f, map[string]any{"alg": "ES256", "kid": "a-es", "crit": []string{"exp"}}, map[string]any{"iss": 1, "aud": []any{nil, 2}}))
	f.Add(unsignedToken(f, map[string]any{"alg": "EdDSA", "kid": strings.Repeat("k", 300)}, map[string]any{"exp": 1e300, "iat": -1e300}))
	f.Add("")
	f.Add(".")
	f.Add("..")
	f.Add("e30.e30.e30")
	f.Add("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJpcm9ubGluay1hZ2VudC1zaXRlLWEifQ.AAAA")
	f.Add(`{"protected":"e30","payload":"e30","signature":""}`)

	f.Fuzz(func(t *testing.T, token string) {
		v := &Verifier{
			Roster:   func() *Roster { return roster },
			Audience: testAudience,
			Replay:   &MemoryReplayCache{Now: func() time.Time { return now }},
			Now:      func() time.Time { return now },
		}
		id, err := v.Verify(context.Background(), token)
		if err == nil {
			c := roster.Client(id.ClientID)
			if c == nil {
				t.Fatalf("accepted a token of unknown client %q", id.ClientID)
			}
			if _, ok := c.Key(id.KeyID); !ok {
				t.Fatalf("accepted a token with unknown kid %q", id.KeyID)
			}
			return
		}
		var ve *VerifyError
		if !errors.As(err, &ve) {
			t.Fatalf("refusal is not a *VerifyError: %v", err)
		}
		if len(err.Error()) > 300 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		if len(token) >= 40 && strings.Contains(err.Error(), token) {
			t.Fatalf("error echoes the token: %v", err)
		}
	})
}
