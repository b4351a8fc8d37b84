// Package throttle keeps one operator client from starving the hub (issue 9
// item 8): every call of the operator API counts against a token bucket of
// its client (golang.org/x/time/rate, one limiter per client id, checked by
// go-grpc-middleware v2's interceptors/ratelimit), and each client may hold
// at most a configured number of streams open at once. A refused call gets
// ResourceExhausted; a rate-limited one carries a google.rpc.RetryInfo
// detail saying how long to wait; both carry a google.rpc.ErrorInfo with a
// stable reason (hub/grpcerr).
//
// The satellites' link (ironlink.v1.LinkService) and the public services
// (health, reflection; auth.PublicServices) are exempt: they are neither
// counted nor refused, so no operator script can hold up a site's link or a
// load balancer's probe.
//
// Install the interceptors after authentication, so the client id is known
// (authn.FromContext; "anonymous" when authentication is off). Buckets are
// kept per roster client id, so their number is bounded by the roster.
//
// It imports hub/authn, hub/grpcerr and internal/auth; it must not import
// the services it protects.
package throttle
