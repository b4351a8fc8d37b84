package auth

import (
	"context"
	"crypto"
	"fmt"
	"time"

	"google.golang.org/grpc/credentials"
)

// DefaultAssertionLifetime is the lifetime ClientCredentials gives each
// assertion when none is set: long enough for clock skew, far below the
// hub's 5-minute maximum.
const DefaultAssertionLifetime = 2 * time.Minute

// ClientCredentials is a grpc credentials.PerRPCCredentials that signs a
// fresh client assertion (see Sign) for every RPC and sends it as
// "authorization: Bearer <jwt>" (RFC 6750 §2.1). gRPC asks for it once per
// unary call and once per stream, so a satellite's long-lived link presents
// a new assertion (new jti, fresh exp) on every reconnect. Use it with
// grpc.WithPerRPCCredentials.
type ClientCredentials struct {
	// Key signs the assertions (see AlgorithmFor for the key types).
	Key crypto.Signer
	// KID is the key's id in the hub's roster.
	KID string
	// ClientID is the roster client id (iss and sub).
	ClientID string
	// Audience is the hub's configured audience (aud).
	Audience string
	// Lifetime of each assertion (default DefaultAssertionLifetime).
	Lifetime time.Duration
	// Insecure allows sending assertions over a connection without transport
	// security — local development only: anyone on the path could replay a
	// captured token within its lifetime if the hub had no replay cache.
	Insecure bool
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

var _ credentials.PerRPCCredentials = (*ClientCredentials)(nil)

// GetRequestMetadata implements credentials.PerRPCCredentials: it returns
// {"authorization": "Bearer <fresh assertion>"}. Errors (a bad key or
// configuration) fail the RPC before anything is sent.
func (c *ClientCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	lifetime := c.Lifetime
	if lifetime <= 0 {
		lifetime = DefaultAssertionLifetime
	}
	tok, err := Sign(c.Key, c.KID, c.ClientID, c.Audience, lifetime, now)
	if err != nil {
		return nil, fmt.Errorf("client credentials for %s: %w", c.ClientID, err)
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: true
// (TLS required) unless Insecure is set.
func (c *ClientCredentials) RequireTransportSecurity() bool { return !c.Insecure }
