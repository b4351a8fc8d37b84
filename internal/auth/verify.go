package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Names of the checks a client assertion can fail; VerifyError.Check is one
// of them, and the hub's Unauthenticated messages name them.
const (
	CheckMissing       = "missing token"         // no bearer token at all
	CheckMalformed     = "malformed"             // not a compact JWS/JWT, or a required claim is missing or ill-typed
	CheckAlgorithm     = "algorithm not allowed" // alg is none, HMAC, or not the one the kid's key implies
	CheckUnknownClient = "unknown client"        // iss is not in the roster, or iss ≠ sub
	CheckUnknownKID    = "unknown kid"           // no kid, or the client has no key with that kid
	CheckSignature     = "bad signature"         // the signature does not verify with the kid's key
	CheckAudience      = "wrong audience"        // aud does not contain the hub's audience
	CheckExpired       = "expired"               // now > exp + leeway
	CheckNotYetValid   = "not yet valid"         // nbf or iat later than now + leeway
	CheckLifetime      = "lifetime too long"     // exp − iat > MaxLifetime
	CheckReplay        = "replayed jti"          // the jti was already used within its lifetime
)

// MaxTokenBytes bounds the size of a token Verify looks at; longer ones are
// malformed without being decoded.
const MaxTokenBytes = 8 << 10

// MaxJTIBytes bounds the jti claim (it is stored in the replay cache).
const MaxJTIBytes = 256

// Verifier defaults.
const (
	DefaultMaxLifetime = 5 * time.Minute
	DefaultLeeway      = 30 * time.Second
)

// acceptedAlgorithms are the only algorithms the parser lets through; the
// kid's key then narrows that to one (see AlgorithmFor).
var acceptedAlgorithms = []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA}

// VerifyError is a refused client assertion. Check is one of the Check*
// constants; Detail (optional) adds non-secret context such as the client id
// or kid the token named, or the times involved. Neither ever contains key
// material or the token itself.
type VerifyError struct {
	Check  string
	Detail string
}

// Error returns "token <check>" ("missing token" for CheckMissing),
// followed by ": <detail>" when there is a detail.
func (e *VerifyError) Error() string {
	msg := "token " + e.Check
	if strings.Contains(e.Check, "token") {
		msg = e.Check
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// RefusedMessage is what a caller is told for every check that depends on
// the roster before the signature has been verified (CheckUnknownClient,
// CheckUnknownKID, CheckAlgorithm, CheckSignature): one message for all of
// them, so that a caller without a roster key cannot learn whether a client
// id or kid exists. The check and its detail go to the hub's log only.
const RefusedMessage = "token refused: this hub does not accept the client, key or signature it names (the hub's log says why)"

// CallerMessage returns the message the caller of a refused RPC may read:
// RefusedMessage for the roster-dependent checks (see there), Error() for
// the rest (a missing or malformed token judged without the roster, or
// time, audience, lifetime and replay checks that only a token signed with
// a roster key reaches).
func (e *VerifyError) CallerMessage() string {
	switch e.Check {
	case CheckUnknownClient, CheckUnknownKID, CheckAlgorithm, CheckSignature:
		return RefusedMessage
	}
	return e.Error()
}

// Is makes errors.Is(err, &VerifyError{Check: c}) match any VerifyError with
// Check c (and &VerifyError{} match any VerifyError).
func (e *VerifyError) Is(target error) bool {
	t, ok := target.(*VerifyError)
	return ok && (t.Check == "" || t.Check == e.Check)
}

func refuse(check, format string, args ...any) *VerifyError {
	e := &VerifyError{Check: check}
	if format != "" {
		e.Detail = fmt.Sprintf(format, args...)
	}
	return e
}

// Identity is an authenticated caller.
type Identity struct {
	// ClientID is the roster client id (the token's iss and sub).
	ClientID string
	// Site is the satellite's site; empty for operators.
	Site string
	// Sites are the sites an operator may read and change, as the roster
	// said when the token was verified; nil means every site (see
	// AllowsSite).
	Sites []string
	// Scopes the client held in the roster when the token was verified.
	Scopes []string
	// KeyID is the kid of the key that signed the token.
	KeyID string
}

// HasScope reports whether the identity holds scope.
func (id Identity) HasScope(scope string) bool { return slices.Contains(id.Scopes, scope) }

// AllowsSite reports whether the identity may read and change devices of
// site: a satellite only its own site, an operator the sites of its roster
// entry (every site when it lists none).
func (id Identity) AllowsSite(site string) bool {
	switch {
	case id.Site != "":
		return id.Site == site
	case id.Sites == nil:
		return true
	}
	return slices.Contains(id.Sites, site)
}

// SiteBound reports whether the identity is limited to some sites (a
// satellite, or an operator whose roster entry lists sites).
func (id Identity) SiteBound() bool { return id.Site != "" || id.Sites != nil }

// Verifier checks client assertions (RFC 7523 §3, OpenID Connect
// private_key_jwt) against a roster. It is safe for concurrent use; set the
// fields before the first Verify and do not change them afterwards.
type Verifier struct {
	// Roster returns the current roster (e.g. RosterWatcher.Roster); required.
	Roster func() *Roster
	// Audience must appear in the token's aud claim; required. The hub uses
	// one configured value (its public URL or name) for every replica.
	Audience string
	// MaxLifetime is the longest exp − iat accepted (default 5 minutes).
	MaxLifetime time.Duration
	// Leeway is the clock skew tolerated on exp, nbf and iat (default 30 s).
	Leeway time.Duration
	// Replay remembers accepted jti values; required, and shared by all
	// replicas (hub/store.Store implements it over PostgreSQL).
	Replay ReplayCache
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Verify checks token and returns the caller's identity. The checks, in
// order (the first failure is returned as a *VerifyError naming it):
//
//  1. present, at most MaxTokenBytes, a compact JWS (RFC 7515 §7.1) whose
//     alg is ES256, RS256 or EdDSA ("none" and HMAC are never accepted);
//  2. iss = sub = a roster client (RFC 7523 §3 items 1-2);
//  3. kid names one of that client's keys, and alg is the one that key
//     implies (no algorithm confusion, RFC 8725 §3.1);
//  4. the signature verifies with that key (RFC 7523 §3 item 9);
//  5. exp and iat are present, aud contains Audience (item 3), iat and nbf
//     are not later than now + Leeway (item 5), exp − iat ≤ MaxLifetime,
//     exp + Leeway is not past (item 4);
//  6. jti is present, printable, at most MaxJTIBytes, and not seen before
//     for this client (item 7): it is remembered for exp + 2×Leeway − now
//     (now and exp on this Verifier's clock; the cache counts the duration
//     on its own clock, so the hub's and the database's clocks never mix).
//
// A replay cache failure is returned as a plain wrapped error (not a
// VerifyError): the token is refused but the caller is not at fault. A
// misconfigured Verifier (no roster, audience or replay cache) is likewise a
// plain error.
func (v *Verifier) Verify(ctx context.Context, token string) (Identity, error) {
	if v.Replay == nil {
		return Identity{}, errors.New("verifier misconfigured: roster, audience and replay cache are required")
	}
	client, key, claims, exp, leeway, now, err := v.authentic(token)
	if err != nil {
		return Identity{}, err
	}
	// The jti's lifetime is computed on this verifier's clock, the one
	// that judged exp, and handed over as a duration: the cache measures it
	// on its own clock (see ReplayCache). One more leeway covers another
	// replica whose clock is behind this one's by up to a leeway.
	ttl := time.Unix(exp, 0).Add(2 * leeway).Sub(now)
	replayed, err := v.Replay.Remember(ctx, client.ID, claims.ID, ttl)
	if err != nil {
		return Identity{}, fmt.Errorf("check jti replay: %w", err)
	}
	if replayed {
		return Identity{}, refuse(CheckReplay, "client %s", client.ID)
	}
	return Identity{ClientID: client.ID, Site: client.Site, Sites: slices.Clone(client.Sites), Scopes: slices.Clone(client.Scopes), KeyID: key.KID}, nil
}

// Authentic runs checks 1-5 of Verify — everything but the replay cache —
// without I/O: nil means token is signed by a key of a roster client and
// is within its times and audience. It is the admission check a hub runs
// before it reads a request's body (hub/admission); Verify must still run
// (it alone remembers the jti). Errors as Verify's (a *VerifyError, or a
// plain error for a misconfigured Verifier).
func (v *Verifier) Authentic(token string) error {
	_, _, _, _, _, _, err := v.authentic(token)
	return err
}

// authentic runs checks 1-5 of Verify and returns what the replay check
// needs.
func (v *Verifier) authentic(token string) (client *Client, key Key, claims jwt.Claims, exp int64, leeway time.Duration, now time.Time, err error) {
	if v.Roster == nil || v.Audience == "" {
		return nil, Key{}, claims, 0, 0, now, errors.New("verifier misconfigured: roster, audience and replay cache are required")
	}
	tok, hdr, claims, err := parseAssertion(token)
	if err != nil {
		return nil, Key{}, claims, 0, 0, now, err
	}
	client, key, err = v.signingKey(claims, hdr)
	if err != nil {
		return nil, Key{}, claims, 0, 0, now, err
	}
	if err := tok.Claims(key.Public); err != nil {
		return nil, Key{}, claims, 0, 0, now, refuse(CheckSignature, "client %s key %s", client.ID, key.KID)
	}
	// The signature holds: the claims decoded above are authentic.
	exp, leeway, now, err = v.checkClaims(claims)
	return client, key, claims, exp, leeway, now, err
}

// parseAssertion parses token as a compact JWS with one signature of an
// accepted algorithm (checks 1 and the form of 2 of Verify) and decodes its
// claims without verifying them.
func parseAssertion(token string) (*jwt.JSONWebToken, jose.Header, jwt.Claims, error) {
	var claims jwt.Claims
	if token == "" {
		return nil, jose.Header{}, claims, refuse(CheckMissing, "")
	}
	if len(token) > MaxTokenBytes {
		return nil, jose.Header{}, claims, refuse(CheckMalformed, "longer than %d bytes", MaxTokenBytes)
	}
	tok, err := jwt.ParseSigned(token, acceptedAlgorithms)
	if err != nil {
		var ua *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &ua) {
			return nil, jose.Header{}, claims, refuse(CheckAlgorithm, "alg %s", safe(string(ua.Got)))
		}
		if alg, ok := headerAlg(token); ok && !slices.Contains(acceptedAlgorithms, jose.SignatureAlgorithm(alg)) {
			return nil, jose.Header{}, claims, refuse(CheckAlgorithm, "alg %s", safe(alg))
		}
		return nil, jose.Header{}, claims, refuse(CheckMalformed, "not a signed JWT in compact serialization")
	}
	if len(tok.Headers) != 1 {
		return nil, jose.Header{}, claims, refuse(CheckMalformed, "want exactly one signature")
	}
	if err := tok.UnsafeClaimsWithoutVerification(&claims); err != nil {
		return nil, jose.Header{}, claims, refuse(CheckMalformed, "claims are not a JSON object of registered claims")
	}
	return tok, tok.Headers[0], claims, nil
}

// signingKey finds the roster's client named by iss (= sub) and its key
// named by the header's kid, whose algorithm must be the header's (checks 2
// and 3 of Verify).
func (v *Verifier) signingKey(claims jwt.Claims, hdr jose.Header) (*Client, Key, error) {
	if claims.Issuer == "" || claims.Subject != claims.Issuer {
		return nil, Key{}, refuse(CheckUnknownClient, "iss and sub must both be the client id")
	}
	roster := v.Roster()
	if roster == nil {
		return nil, Key{}, errors.New("verifier misconfigured: no roster loaded")
	}
	client := roster.Client(claims.Issuer)
	if client == nil {
		return nil, Key{}, refuse(CheckUnknownClient, "client %s", safe(claims.Issuer))
	}
	if hdr.KeyID == "" {
		return nil, Key{}, refuse(CheckUnknownKID, "client %s: the token header names no kid", client.ID)
	}
	key, ok := client.Key(hdr.KeyID)
	if !ok {
		return nil, Key{}, refuse(CheckUnknownKID, "client %s has no key %s", client.ID, safe(hdr.KeyID))
	}
	if hdr.Algorithm != key.Algorithm {
		return nil, Key{}, refuse(CheckAlgorithm, "client %s key %s is %s, token says %s", client.ID, key.KID, key.Algorithm, safe(hdr.Algorithm))
	}
	return client, key, nil
}

// checkClaims checks the authentic claims (checks 5 and the form of 6 of
// Verify: times, audience, lifetime, jti) and returns exp (Unix seconds),
// the leeway in force and the now the times were judged at, which bound
// how long the jti is remembered.
func (v *Verifier) checkClaims(claims jwt.Claims) (exp int64, leeway time.Duration, now time.Time, err error) {
	if claims.Expiry == nil || claims.IssuedAt == nil {
		return 0, 0, now, refuse(CheckMalformed, "exp and iat are required")
	}
	exp, iat := int64(*claims.Expiry), int64(*claims.IssuedAt)
	if exp < 0 || iat < 0 || (claims.NotBefore != nil && int64(*claims.NotBefore) < 0) {
		return 0, 0, now, refuse(CheckMalformed, "negative time claim")
	}
	if !claims.Audience.Contains(v.Audience) {
		return 0, 0, now, refuse(CheckAudience, "want %s", safe(v.Audience))
	}
	now = time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	leeway, maxLife := v.Leeway, v.MaxLifetime
	if leeway <= 0 {
		leeway = DefaultLeeway
	}
	if maxLife <= 0 {
		maxLife = DefaultMaxLifetime
	}
	nowS, leewayS := now.Unix(), int64(leeway/time.Second)
	if iat > nowS+leewayS {
		return 0, 0, now, refuse(CheckNotYetValid, "issued at %s, in the future", time.Unix(iat, 0).UTC().Format(time.RFC3339))
	}
	if exp < iat {
		return 0, 0, now, refuse(CheckMalformed, "exp before iat")
	}
	if exp-iat > int64(maxLife/time.Second) {
		return 0, 0, now, refuse(CheckLifetime, "exp − iat is %ds, at most %s", exp-iat, maxLife)
	}
	if nowS > exp+leewayS {
		return 0, 0, now, refuse(CheckExpired, "at %s", time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	if claims.NotBefore != nil && int64(*claims.NotBefore) > nowS+leewayS {
		return 0, 0, now, refuse(CheckNotYetValid, "not before %s", time.Unix(int64(*claims.NotBefore), 0).UTC().Format(time.RFC3339))
	}
	if !validJTI(claims.ID) {
		return 0, 0, now, refuse(CheckMalformed, "jti must be 1-%d printable characters", MaxJTIBytes)
	}
	return exp, leeway, now, nil
}

func validJTI(s string) bool {
	if s == "" || len(s) > MaxJTIBytes {
		return false
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// headerAlg decodes the alg of a compact JWS header without trusting it.
func headerAlg(token string) (string, bool) {
	h, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return "", false
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &hdr) != nil {
		return "", false
	}
	return hdr.Alg, true
}

// safe quotes an attacker-chosen string for an error message, bounded to 64 bytes.
func safe(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}
