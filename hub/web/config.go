package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Authentication modes (Config.Auth).
const (
	// AuthMTLS: TLS client certificates whose public key is an operator's roster key.
	AuthMTLS = "mtls"
	// AuthProxy: a trusted authenticating proxy names the roster client in a header.
	AuthProxy = "proxy"
)

// DefaultUserHeader is the header a trusted proxy names the client in
// (oauth2-proxy sets it with --pass-user-headers; with nginx auth_request it
// is X-Auth-Request-User, see Config.UserHeader).
const DefaultUserHeader = "X-Forwarded-User"

// Config configures the fleet view. The zero value is "off".
type Config struct {
	// Addr is the listen address: host:port, or unix:PATH for a unix socket
	// (created with mode 0600). Empty turns the fleet view off.
	Addr string
	// Auth is AuthMTLS (default) or AuthProxy.
	Auth string
	// TrustedProxies is a comma-separated list of IP prefixes or addresses
	// (for example "10.0.0.5,192.168.4.0/24") whose requests may name the
	// client in UserHeader. Required for AuthProxy on a TCP listener; a
	// unix-socket listener trusts every connection.
	TrustedProxies string
	// UserHeader is the header naming the roster client id in AuthProxy mode
	// (default DefaultUserHeader).
	UserHeader string
	// TLSCert and TLSKey are the server certificate and key (PEM) of a TCP
	// listener, reloaded on change; the hub passes its own. Required unless
	// Plaintext (AuthMTLS always needs them).
	TLSCert, TLSKey string
	// Plaintext serves a TCP listener without TLS (local development only;
	// the hub sets it from --plaintext).
	Plaintext bool
	// Refresh is how often pages refresh their live region (default 5 s).
	Refresh time.Duration

	trusted []netip.Prefix
}

// Validate checks c and fills defaults; errors name the flag to fix.
func (c *Config) Validate() error {
	if c.Addr == "" {
		return errors.New("web: no listen address (--web-addr)")
	}
	if c.Auth == "" {
		c.Auth = AuthMTLS
	}
	if c.UserHeader == "" {
		c.UserHeader = DefaultUserHeader
	}
	c.UserHeader = http.CanonicalHeaderKey(c.UserHeader)
	if c.Refresh == 0 {
		c.Refresh = 5 * time.Second
	}
	if c.Refresh < 500*time.Millisecond {
		return fmt.Errorf("web: refresh %s is below 500ms", c.Refresh)
	}
	c.trusted = nil
	for _, s := range strings.Split(c.TrustedProxies, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("web: trusted proxy %q is neither an IP address nor a prefix (--web-trusted-proxies)", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		c.trusted = append(c.trusted, p.Masked())
	}
	unix := c.unixPath() != ""
	switch c.Auth {
	case AuthMTLS:
		if unix || c.Plaintext || c.TLSCert == "" || c.TLSKey == "" {
			return errors.New("web: --web-auth mtls needs a TCP --web-addr with TLS (the hub's --tls-cert and --tls-key, not --plaintext)")
		}
	case AuthProxy:
		if !unix && len(c.trusted) == 0 {
			return errors.New("web: --web-auth proxy on a TCP address needs --web-trusted-proxies (the proxies' addresses), or listen on unix:PATH")
		}
		if !unix && !c.Plaintext && (c.TLSCert == "" || c.TLSKey == "") {
			return errors.New("web: a TCP --web-addr needs the hub's --tls-cert and --tls-key (or --plaintext)")
		}
	default:
		return fmt.Errorf("web: --web-auth %q is neither %q nor %q", c.Auth, AuthMTLS, AuthProxy)
	}
	return nil
}

// unixPath returns the socket path of a unix:PATH address, else "".
func (c *Config) unixPath() string {
	if p, ok := strings.CutPrefix(c.Addr, "unix:"); ok {
		return p
	}
	return ""
}
