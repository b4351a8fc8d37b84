package web

import (
	"context"
	"crypto"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ironlink/ironlink/internal/auth"
)

// Identity is the authenticated caller of a page: a roster operator.
type Identity struct {
	// ClientID is the roster client id.
	ClientID string
	// Scopes the client holds in the roster now.
	Scopes []string
	// KeyID is the kid of the roster key the client certificate matched
	// (AuthMTLS); empty in AuthProxy mode.
	KeyID string
	// Via says how the caller was authenticated: "mtls" or "proxy".
	Via string
	// Sites are the sites the roster lets the client read and change (its
	// "sites"); nil means every site.
	Sites []string
}

// CanRead reports whether the identity holds operations:read.
func (id Identity) CanRead() bool { return has(id.Scopes, auth.ScopeOperationsRead) }

// CanWrite reports whether the identity holds operations:write.
func (id Identity) CanWrite() bool { return has(id.Scopes, auth.ScopeOperationsWrite) }

func has(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// authError is a refused request: the HTTP status and what to tell the user.
type authError struct {
	code int
	msg  string
}

func (e *authError) Error() string { return e.msg }

type ctxKey int

const (
	identityKey ctxKey = iota
	unixConnKey
)

func identityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey).(Identity)
	return id, ok
}

// authenticate names the caller of r under the current roster, or says why not
// (401: no credentials; 403: credentials that name no operator, or a proxy
// header from an untrusted address).
func (s *Server) authenticate(r *http.Request) (Identity, *authError) {
	roster := s.roster()
	var id Identity
	switch s.cfg.Auth {
	case AuthProxy:
		name := strings.TrimSpace(r.Header.Get(s.cfg.UserHeader))
		if !s.trustedPeer(r) {
			return id, &authError{http.StatusForbidden, "requests must come through the trusted authentication proxy (" + s.cfg.UserHeader + " from --web-trusted-proxies)"}
		}
		if name == "" {
			return id, &authError{http.StatusUnauthorized, "the authentication proxy sent no " + s.cfg.UserHeader + " header"}
		}
		c := roster.Client(name)
		if c == nil || c.IsSatellite() {
			return id, &authError{http.StatusForbidden, fmt.Sprintf("%q is not an operator in the hub's roster", name)}
		}
		id = Identity{ClientID: c.ID, Scopes: c.Scopes, Sites: c.Sites, Via: AuthProxy}
	case AuthMTLS:
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return id, &authError{http.StatusUnauthorized, "a client certificate is required: one whose public key is an operator key in the hub's roster"}
		}
		cert := r.TLS.PeerCertificates[0]
		now := time.Now()
		if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
			return id, &authError{http.StatusUnauthorized, "the client certificate is expired or not yet valid"}
		}
		c, kid := clientByKey(roster, cert.PublicKey, cert.Subject.CommonName)
		if c == nil {
			return id, &authError{http.StatusForbidden, "the client certificate's key is no operator key in the hub's roster"}
		}
		id = Identity{ClientID: c.ID, Scopes: c.Scopes, Sites: c.Sites, KeyID: kid, Via: AuthMTLS}
	}
	if !id.CanRead() {
		return id, &authError{http.StatusForbidden, fmt.Sprintf("client %s lacks the operations:read scope", id.ClientID)}
	}
	return id, nil
}

// clientByKey finds the operator whose roster key equals pub; when several
// share it, the one named cn wins, else the first by id.
func clientByKey(r *auth.Roster, pub crypto.PublicKey, cn string) (*auth.Client, string) {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := pub.(equaler)
	if !ok {
		return nil, ""
	}
	var found *auth.Client
	var kid string
	for _, c := range r.Clients() {
		if c.IsSatellite() {
			continue
		}
		for _, k := range c.Keys {
			if e.Equal(k.Public) && (found == nil || c.ID == cn) {
				found, kid = c, k.KID
			}
		}
	}
	return found, kid
}

// trustedPeer reports whether r arrived from a trusted proxy: over the unix
// socket, or from an address in Config.TrustedProxies.
func (s *Server) trustedPeer(r *http.Request) bool {
	if unix, _ := r.Context().Value(unixConnKey).(bool); unix {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range s.cfg.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
