// Package authn authenticates and authorizes every gRPC call the hub serves.
//
// UnaryInterceptor and StreamInterceptor (go-grpc-middleware v2
// interceptors/auth, wrapped in interceptors/selector so that
// auth.PublicServices — health and reflection — pass without a token) take
// the "authorization: Bearer <jwt>" metadata (RFC 6750 §2.1), verify the
// client assertion with an auth.Verifier (RFC 7523 §3), and authorize the
// call with auth.MethodScopes. The caller's auth.Identity is then in the
// handler's context (FromContext).
//
// Status codes: a missing, malformed or refused token is Unauthenticated,
// with a message naming the failed check ("token expired", "token wrong
// audience", ...) and never any key material — except the checks that
// depend on the roster before the signature holds (unknown client, unknown
// kid, algorithm, bad signature): those all get auth.RefusedMessage, so the
// caller cannot tell whether a client id exists; the hub's log names the
// check and its detail; a valid token without the
// method's scope, or a method missing from auth.MethodScopes, is
// PermissionDenied; a replay-cache (database) failure is Unavailable, so the
// client retries.
//
// Mutual TLS binding (RFC 8705 §3 in spirit): when the connection carries a
// verified client certificate, its Subject CommonName, or one of its URI or
// DNS SANs, must equal the token's client id; otherwise the call is
// Unauthenticated ("client certificate does not match client id").
package authn
