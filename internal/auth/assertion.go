package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/cryptosigner"
	"github.com/go-jose/go-jose/v4/jwt"
)

// assertionClaims are the claims of a client assertion (RFC 7523 §3 and
// OpenID Connect Core §9): the registered claims of RFC 7519 §4.1.
type assertionClaims struct {
	jwt.Claims
}

// Sign returns a client assertion: a JWT (RFC 7519) in JWS compact
// serialization (RFC 7515 §7.1), as RFC 7523 §2.2 and §3 and the OpenID
// Connect "private_key_jwt" method define it:
//
//   - header: alg from the key type (ES256 for P-256, RS256 for RSA ≥ 2048
//     bits, EdDSA for Ed25519; see AlgorithmFor), typ "JWT", kid;
//   - iss = sub = clientID, aud = audience (a single string);
//   - iat = nbf = now, exp = now + lifetime (NumericDate, whole seconds);
//   - jti: 128 random bits, base64url.
//
// key may be any crypto.Signer (an HSM or KMS key too) whose public key
// AlgorithmFor accepts. lifetime must be positive; verifiers refuse
// lifetimes above their maximum (5 minutes by default), so keep it short.
// Errors name the bad argument; they never include key material.
func Sign(key crypto.Signer, kid, clientID, audience string, lifetime time.Duration, now time.Time) (string, error) {
	if key == nil {
		return "", errors.New("sign assertion: no key")
	}
	if kid == "" || clientID == "" || audience == "" {
		return "", errors.New("sign assertion: kid, client id and audience are required")
	}
	if lifetime < time.Second {
		return "", fmt.Errorf("sign assertion: lifetime %s is below 1s", lifetime)
	}
	alg, err := AlgorithmFor(key)
	if err != nil {
		return "", fmt.Errorf("sign assertion: %w", err)
	}
	var signingKey any = key
	switch key.(type) {
	case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
	default:
		signingKey = cryptosigner.Opaque(key) // hardware and KMS keys
	}
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: signingKey}, opts)
	if err != nil {
		return "", fmt.Errorf("sign assertion: %w", err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("sign assertion: jti: %w", err)
	}
	issued := jwt.NewNumericDate(now)
	claims := assertionClaims{jwt.Claims{
		Issuer:    clientID,
		Subject:   clientID,
		Audience:  jwt.Audience{audience},
		Expiry:    jwt.NewNumericDate(now.Add(lifetime)),
		NotBefore: issued,
		IssuedAt:  issued,
		ID:        base64.RawURLEncoding.EncodeToString(id[:]),
	}}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign assertion: %w", err)
	}
	return tok, nil
}
