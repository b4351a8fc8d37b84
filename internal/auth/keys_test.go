package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeyFilesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			k := testKey(t, "file-"+alg, alg)
			if got, err := AlgorithmFor(k); err != nil || got != alg {
				t.Fatalf("AlgorithmFor = %q, %v", got, err)
			}
			path := filepath.Join(dir, alg+".pem")
			if err := WritePrivateKeyPEM(path, k); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
			}
			data, _ := os.ReadFile(path)
			if !strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----") {
				t.Fatalf("not PKCS#8 PEM: %.30s", data)
			}
			loaded, err := LoadPrivateKey(path)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := PublicKeyPEM(loaded)
			if err != nil {
				t.Fatal(err)
			}
			parsed, palg, err := ParsePublicKeyPEM([]byte(pub))
			if err != nil || palg != alg || !sameKey(parsed, k.Public()) {
				t.Fatalf("public key round trip: %v %s", err, palg)
			}
			// A token signed with the loaded key verifies against the original public key.
			r, err := ParseRoster([]byte("operators:\n" + mustEntry(t, "tool", "k", loaded.Public())))
			if err != nil {
				t.Fatal(err)
			}
			v := newVerifier(r, t0)
			tok, err := Sign(loaded, "k", "tool", testAudience, time.Minute, t0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(context.Background(), tok); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustEntry(t *testing.T, id, kid string, pub crypto.PublicKey) string {
	t.Helper()
	e, err := FormatRosterEntry(id, "", []string{ScopeOperationsRead}, kid, pub)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestLoadPrivateKeyLegacyAndBad(t *testing.T) {
	dir := t.TempDir()
	ec := testKey(t, "a-es", AlgES256).(*ecdsa.PrivateKey)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := LoadPrivateKey(write("sec1.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}))); err != nil {
		t.Fatalf("SEC 1 key: %v", err)
	}
	short, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	shortDER, _ := x509.MarshalPKCS8PrivateKey(short)
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"empty":     {nil, "no PEM block"},
		"cert type": {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), `PEM block "CERTIFICATE"`},
		"garbage":   {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")}), "parse PRIVATE KEY"},
		"rsa 1024":  {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: shortDER}), "at least 2048"},
		"p-384":     {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p384DER}), "only P-256"},
	} {
		_, err := LoadPrivateKey(write(strings.ReplaceAll(name, " ", "_")+".pem", tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: err = %v, want %q and the path", name, err, tc.want)
		}
	}
	if _, err := LoadPrivateKey(filepath.Join(dir, "missing.pem")); err == nil {
		t.Error("missing file accepted")
	}
	if _, err := GenerateKey("HS256"); err == nil {
		t.Error("GenerateKey(HS256) accepted")
	}
	if _, err := AlgorithmFor([]byte("secret")); err == nil {
		t.Error("AlgorithmFor(HMAC key) accepted")
	}
}

// opaqueSigner hides the concrete key type, as an HSM or KMS key would.
type opaqueSigner struct{ s crypto.Signer }

func (o opaqueSigner) Public() crypto.PublicKey { return o.s.Public() }
func (o opaqueSigner) Sign(r io.Reader, d []byte, opts crypto.SignerOpts) ([]byte, error) {
	return o.s.Sign(r, d, opts)
}

func TestSignWithOpaqueSigner(t *testing.T) {
	r := mustRoster(t, siteA, siteB)
	for _, c := range []struct{ name, alg, kid, client string }{
		{"a-es", AlgES256, "a-es", siteA.id}, {"a-ed", AlgEdDSA, "a-ed", siteA.id}, {"b-rs", AlgRS256, "b-rs", siteB.id},
	} {
		tok, err := Sign(opaqueSigner{testKey(t, c.name, c.alg)}, c.kid, c.client, testAudience, time.Minute, t0)
		if err != nil {
			t.Fatalf("%s: %v", c.alg, err)
		}
		if _, err := newVerifier(r, t0).Verify(context.Background(), tok); err != nil {
			t.Fatalf("%s opaque signature: %v", c.alg, err)
		}
	}
}

func TestSignArguments(t *testing.T) {
	k := testKey(t, "a-es", AlgES256)
	for name, f := range map[string]func() (string, error){
		"nil key":       func() (string, error) { return Sign(nil, "k", "c", "a", time.Minute, t0) },
		"no kid":        func() (string, error) { return Sign(k, "", "c", "a", time.Minute, t0) },
		"no client":     func() (string, error) { return Sign(k, "k", "", "a", time.Minute, t0) },
		"no audience":   func() (string, error) { return Sign(k, "k", "c", "", time.Minute, t0) },
		"zero life":     func() (string, error) { return Sign(k, "k", "c", "a", 0, t0) },
		"negative life": func() (string, error) { return Sign(k, "k", "c", "a", -time.Minute, t0) },
	} {
		if _, err := f(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Two assertions never share a jti.
	a, _ := Sign(k, "k", "c", "a", time.Minute, t0)
	b, _ := Sign(k, "k", "c", "a", time.Minute, t0)
	if a == b {
		t.Fatal("two assertions are identical")
	}
}
