package authn

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
)

type ctxKey struct{}

// FromContext returns the authenticated caller of an RPC, as the
// interceptors put it in the handler's context; for a stream registered
// with Streams, as the roster says now (sites and scopes of the last
// reload). ok is false for public services (health, reflection) and when
// the interceptors are not installed.
func FromContext(ctx context.Context) (id auth.Identity, ok bool) {
	if ls, live := ctx.Value(liveKey{}).(*liveStream); live {
		return *ls.id.Load(), true
	}
	id, ok = ctx.Value(ctxKey{}).(auth.Identity)
	return id, ok
}

// NewContext returns ctx carrying id, as the interceptors do (for tests and
// in-process callers).
func NewContext(ctx context.Context, id auth.Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// UnaryInterceptor authenticates and authorizes unary calls (see the package
// documentation for the checks and status codes). log receives one line per
// refusal (Warn; Error for a replay-cache failure) and per accepted call
// (Debug). Install it after logging and recovery:
//
//	grpc.ChainUnaryInterceptor(logging..., recovery..., authn.UnaryInterceptor(v, log))
func UnaryInterceptor(v *auth.Verifier, log *slog.Logger) grpc.UnaryServerInterceptor {
	return selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(authFunc(v, log)), selector.MatchFunc(needsAuth))
}

// StreamInterceptor is UnaryInterceptor for streams; the identity is checked
// once, when the stream opens (a satellite presents a fresh assertion on
// every reconnect), and is in stream.Context() for the handler.
func StreamInterceptor(v *auth.Verifier, log *slog.Logger) grpc.StreamServerInterceptor {
	return selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(authFunc(v, log)), selector.MatchFunc(needsAuth))
}

// needsAuth is false for the public services.
func needsAuth(_ context.Context, c interceptors.CallMeta) bool {
	return !slices.Contains(auth.PublicServices, c.Service)
}

func authFunc(v *auth.Verifier, log *slog.Logger) grpcauth.AuthFunc {
	if log == nil {
		log = slog.Default()
	}
	return func(ctx context.Context) (context.Context, error) {
		method, _ := grpc.Method(ctx)
		from := ""
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			from = p.Addr.String()
		}
		token, err := bearer(ctx)
		if err == nil {
			var id auth.Identity
			id, err = v.Verify(ctx, token)
			if err == nil {
				return authorize(ctx, id, method, from, log)
			}
		}
		var ve *auth.VerifyError
		if errors.As(err, &ve) {
			log.Warn("authentication refused", "method", method, "peer", from, "check", ve.Check, "detail", ve.Detail)
			return nil, grpcerr.Unauthenticated(ve.CallerMessage())
		}
		if ctx.Err() != nil {
			// The client went away (cancelled, deadline) while its token
			// was being checked: nothing is wrong with the hub.
			log.Info("client gone during authentication", "method", method, "peer", from, "err", err)
			return nil, grpcerr.FromContext(ctx.Err())
		}
		log.Error("cannot verify token", "method", method, "peer", from, "err", err)
		return nil, grpcerr.TokenCheckUnavailable()
	}
}

// bearer extracts the token of "authorization: Bearer <token>" (RFC 6750 §2.1).
func bearer(ctx context.Context) (string, error) {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization")
	switch len(vals) {
	case 0:
		return "", &auth.VerifyError{Check: auth.CheckMissing, Detail: "send authorization: Bearer <client assertion>"}
	case 1:
	default:
		return "", &auth.VerifyError{Check: auth.CheckMalformed, Detail: "more than one authorization header"}
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", &auth.VerifyError{Check: auth.CheckMalformed, Detail: "authorization scheme must be Bearer"}
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", &auth.VerifyError{Check: auth.CheckMissing, Detail: "empty bearer token"}
	}
	return token, nil
}

// authorize applies the mTLS binding and MethodScopes to an authenticated caller.
func authorize(ctx context.Context, id auth.Identity, method, from string, log *slog.Logger) (context.Context, error) {
	if cert := peerCertificate(ctx); cert != nil && !certNames(cert, id.ClientID) {
		log.Warn("authentication refused", "method", method, "peer", from, "client_id", id.ClientID,
			"check", "client certificate mismatch", "cert_cn", cert.Subject.CommonName)
		return nil, grpcerr.Unauthenticated(fmt.Sprintf("client certificate does not match client id %s", id.ClientID))
	}
	scope, known := auth.RequiredScope(method)
	if !known {
		log.Warn("permission denied: method not in the authorization table", "method", method, "peer", from, "client_id", id.ClientID)
		return nil, grpcerr.PermissionDenied(grpcerr.ReasonMissingScope, fmt.Sprintf("method %s is not in the hub's authorization table", method))
	}
	if !id.HasScope(scope) {
		log.Warn("permission denied: missing scope", "method", method, "peer", from, "client_id", id.ClientID, "scope", scope)
		return nil, grpcerr.PermissionDenied(grpcerr.ReasonMissingScope, fmt.Sprintf("client %s lacks scope %s for %s", id.ClientID, scope, method))
	}
	log.Debug("authenticated", "method", method, "peer", from, "client_id", id.ClientID, "kid", id.KeyID, "site", id.Site)
	return NewContext(ctx, id), nil
}

// peerCertificate returns the client certificate of a TLS connection, or nil.
func peerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return nil
	}
	return info.State.PeerCertificates[0]
}

// certNames reports whether cert's CommonName or a URI or DNS SAN is clientID.
func certNames(cert *x509.Certificate, clientID string) bool {
	if cert.Subject.CommonName == clientID || slices.Contains(cert.DNSNames, clientID) {
		return true
	}
	for _, u := range cert.URIs {
		if u.String() == clientID {
			return true
		}
	}
	return false
}
