package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-jose/go-jose/v4"

	"github.com/ironlink/ironlink/internal/boundedread"
)

// JWS algorithms ("alg", RFC 7518 §3.1 and RFC 8037 §3.1) ironlink signs and
// accepts. The algorithm always follows from the key type: there is no way to
// ask for another one.
const (
	// AlgES256 is ECDSA on P-256 with SHA-256 (RFC 7518 §3.4).
	AlgES256 = "ES256"
	// AlgRS256 is RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3), RSA keys of
	// at least MinRSABits.
	AlgRS256 = "RS256"
	// AlgEdDSA is Ed25519 (RFC 8037 §3.1).
	AlgEdDSA = "EdDSA"
)

// MinRSABits is the smallest RSA modulus accepted, as RFC 7518 §3.3 requires.
const MinRSABits = 2048

// GenerateRSABits is the modulus size GenerateKey uses for RS256 keys.
const GenerateRSABits = 3072

// Algorithms lists the supported algorithms in the order tools offer them.
var Algorithms = []string{AlgES256, AlgRS256, AlgEdDSA}

// AlgorithmFor returns the one JWS algorithm a public or private key implies:
// ES256 for ECDSA P-256, RS256 for RSA of at least MinRSABits, EdDSA for
// Ed25519. Any other key (other curves, short RSA, symmetric keys) is an
// error: a key is never used with an algorithm it does not imply, which rules
// out algorithm-confusion attacks (RFC 8725 §3.1).
func AlgorithmFor(key any) (string, error) {
	if s, ok := key.(crypto.Signer); ok {
		key = s.Public()
	}
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("ECDSA key on curve %s: only P-256 (ES256) is supported", k.Curve.Params().Name)
		}
		return AlgES256, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return "", fmt.Errorf("RSA key of %d bits: at least %d are required", k.N.BitLen(), MinRSABits)
		}
		return AlgRS256, nil
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", fmt.Errorf("Ed25519 key of %d bytes: want %d", len(k), ed25519.PublicKeySize)
		}
		return AlgEdDSA, nil
	case nil:
		return "", errors.New("no key")
	}
	return "", fmt.Errorf("unsupported key type %T: use ECDSA P-256, RSA ≥ %d bits or Ed25519", key, MinRSABits)
}

// GenerateKey creates a new private key for alg: an ECDSA P-256 key for
// ES256, an RSA key of GenerateRSABits bits for RS256, an Ed25519 key for
// EdDSA. Any other alg is an error.
func GenerateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case AlgES256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case AlgRS256:
		return rsa.GenerateKey(rand.Reader, GenerateRSABits)
	case AlgEdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("algorithm %q: want one of ES256, RS256, EdDSA", alg)
}

// MarshalPrivateKeyPEM encodes key as a PKCS#8 "PRIVATE KEY" PEM block (RFC 5208, RFC 7468 §10).
func MarshalPrivateKeyPEM(key crypto.Signer) ([]byte, error) {
	if _, err := AlgorithmFor(key); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key as PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WritePrivateKeyPEM writes key to path as PKCS#8 PEM with mode 0600. It
// writes a temporary file in the same directory and renames it over path, so
// a reader never sees a half-written key; an existing file is replaced.
func WritePrivateKeyPEM(path string, key crypto.Signer) error {
	data, err := MarshalPrivateKeyPEM(key)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write private key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write private key %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write private key %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write private key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write private key %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write private key %s: %w", path, err)
	}
	return nil
}

// LoadPrivateKey reads a private key from a PEM file: PKCS#8 "PRIVATE KEY"
// (what WritePrivateKeyPEM and `ironlink-hub keygen` write), or the older
// "EC PRIVATE KEY" (SEC 1) and "RSA PRIVATE KEY" (PKCS#1) blocks that openssl
// produces. The key must be one AlgorithmFor accepts. Errors name the file
// but never include its contents.
func LoadPrivateKey(path string) (crypto.Signer, error) {
	data, err := boundedread.File(path, boundedread.SmallLimit)
	if err != nil {
		return nil, fmt.Errorf("read private key: %w", err)
	}
	k, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return k, nil
}

// ParsePrivateKeyPEM parses the first PEM block of data as LoadPrivateKey does.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q: want PRIVATE KEY (PKCS#8)", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key type %T cannot sign", key)
	}
	if _, err := AlgorithmFor(signer); err != nil {
		return nil, err
	}
	return signer, nil
}

// PublicKeyPEM encodes pub (a public key, or a crypto.Signer whose public
// half is taken) as a PKIX "PUBLIC KEY" PEM block (RFC 5280 §4.1.2.7,
// RFC 7468 §13) — the form the roster's publicKeyPEM takes.
func PublicKeyPEM(pub any) (string, error) {
	if s, ok := pub.(crypto.Signer); ok {
		pub = s.Public()
	}
	if _, err := AlgorithmFor(pub); err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// ParsePublicKeyPEM parses a PKIX "PUBLIC KEY" or PKCS#1 "RSA PUBLIC KEY" PEM
// block and checks the key with AlgorithmFor. It returns the key and its alg.
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, string, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, "", errors.New("no PEM block found")
	}
	if b, _ := pem.Decode(rest); b != nil {
		return nil, "", errors.New("more than one PEM block: give one public key per kid")
	}
	var pub any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		return nil, "", fmt.Errorf("PEM block %q: want PUBLIC KEY", block.Type)
	}
	if err != nil {
		return nil, "", fmt.Errorf("parse %s: %w", block.Type, err)
	}
	alg, err := AlgorithmFor(pub)
	if err != nil {
		return nil, "", err
	}
	return pub, alg, nil
}

// PublicJWK returns pub as a JSON Web Key (RFC 7517 §4) with "kid", "alg"
// and "use": "sig" — the form the roster's jwk takes.
func PublicJWK(pub any, kid string) (string, error) {
	if s, ok := pub.(crypto.Signer); ok {
		pub = s.Public()
	}
	alg, err := AlgorithmFor(pub)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: alg, Use: "sig"})
	if err != nil {
		return "", fmt.Errorf("encode JWK: %w", err)
	}
	return string(b), nil
}

// Thumbprint returns the RFC 7638 JWK SHA-256 thumbprint of pub, base64url
// without padding (43 characters). `ironlink-hub keygen` uses it as the
// default kid.
func Thumbprint(pub any) (string, error) {
	if s, ok := pub.(crypto.Signer); ok {
		pub = s.Public()
	}
	if _, err := AlgorithmFor(pub); err != nil {
		return "", err
	}
	jwk := jose.JSONWebKey{Key: pub}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// sameKey reports whether two public keys are equal.
func sameKey(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}
