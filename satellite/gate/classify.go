package gate

import (
	"context"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/placement"
	"github.com/ironlink/ironlink/satellite/site"
)

// Classify tells a permanent failure of Apply from a transient one — as a
// site.Result: whether applying the same desired state again, unchanged,
// can succeed without anyone acting (Retry, transient: the hub resends
// after its capped backoff, so After is 0) or cannot (Failed, permanent:
// the hub waits for a newer desired state or an operator's retry; Message
// is err's text) — reading
// the OpenStack answer inside err (docs/design/openstack.md §3.1, §5.1 and §6; the
// Ironic and Placement clients have already retried what was worth
// retrying within their budgets):
//
//   - permanent "NodeNotFound": Ironic answered 404 for the node
//     (ironic.ErrNodeNotFound): it was deleted;
//   - permanent "AccessDenied": 403, a service policy refuses the
//     credential's roles (Placement traits need admin or service);
//   - permanent "AccessRuleDenied": 401 from the service although Keystone
//     had just issued a new token (gophercloud's
//     ErrErrorAfterReauthentication): keystonemiddleware refuses a request
//     that no access rule of the application credential allows with 401
//     "Token authorization failed", so the credential lacks the rule;
//   - permanent "BadRequest", "NotFound", "MethodNotAllowed",
//     "NotAcceptable", "ClientError": any other 4xx but 408 and 429 (for
//     example Ironic's 400 beyond 50 traits per node);
//   - transient "AuthenticationFailed": Keystone refused or could not issue
//     a token (gophercloud's ErrUnableToReauthenticate, or the auth guard
//     backing off): a rotated or restored credential heals it, and the
//     site's OpenStackAuthenticated condition already says so;
//   - transient "NodeLocked" (409 after the write retries),
//     "GenerationConflict" (Placement's generation race outlasted its
//     rounds), "Conflict" (any other 409), "RateLimited" (429), "Timeout"
//     (408, a deadline or network timeout), "ServiceUnavailable" (502, 503,
//     504), "ServerError" (other 5xx), "ConnectionFailed" (refused, reset or
//     cut connections), "Canceled" (the satellite is stopping);
//   - transient "Unclassified" for anything else, as every failure was
//     before the classes existed.
//
// When err joins several failures (a quarantine tries the node and the
// provider, and reports both), the result is permanent as soon as one part
// is: repeating the call cannot fix that part. Classify(nil) is
// site.Done().
func Classify(err error) site.Result {
	if err == nil {
		return site.Done()
	}
	var first *site.Result
	walk(err, func(e error) bool {
		f, ok := classifyOne(e)
		if !ok {
			return true
		}
		if first == nil || (f.Permanent() && !first.Permanent()) {
			first = &f
		}
		return !f.Permanent()
	})
	if first == nil {
		return transient("Unclassified")
	}
	if first.Permanent() {
		first.Message = err.Error()
	}
	return *first
}

// transient is a failure that trying again can fix (the hub's backoff
// decides when).
func transient(reason string) site.Result { return site.RetryAfter(0, reason) }

// permanent is a failure that trying again cannot fix.
func permanent(reason string) site.Result {
	return site.Result{State: site.StateFailed, Reason: reason}
}

// walk calls visit on err and every error it wraps, depth first, in order,
// following both Unwrap() error and Unwrap() []error, until visit returns
// false. A chain segment that classifyOne recognises is not descended
// further (its cause is already accounted for).
func walk(err error, visit func(error) bool) bool {
	for err != nil {
		if !visit(err) {
			return false
		}
		if _, ok := classifyOne(err); ok {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if !walk(e, visit) {
					return false
				}
			}
			return true
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return true
		}
	}
	return true
}

// classifyOne classifies err itself (not what it wraps); ok is false when
// err says nothing about the class.
func classifyOne(err error) (site.Result, bool) {
	switch e := err.(type) {
	case *gophercloud.ErrErrorAfterReauthentication:
		return classifyAfterReauth(e.ErrOriginal)
	case gophercloud.ErrErrorAfterReauthentication:
		return classifyAfterReauth(e.ErrOriginal)
	case *gophercloud.ErrUnableToReauthenticate, gophercloud.ErrUnableToReauthenticate:
		return transient("AuthenticationFailed"), true
	case gophercloud.ErrUnexpectedResponseCode:
		return classifyStatus(e.Actual), true
	case *gophercloud.ErrUnexpectedResponseCode:
		if e != nil {
			return classifyStatus(e.Actual), true
		}
	}
	// Identity, not errors.Is: this link of the chain itself; walk visits
	// what it wraps.
	switch {
	case err == ironic.ErrNodeNotFound:
		return permanent("NodeNotFound"), true
	case err == ironic.ErrNodeLocked:
		return transient("NodeLocked"), true
	case err == placement.ErrGenerationConflict:
		return transient("GenerationConflict"), true
	case err == openstack.ErrAuthBackoff:
		return transient("AuthenticationFailed"), true
	case err == context.DeadlineExceeded:
		return transient("Timeout"), true
	case err == context.Canceled:
		return transient("Canceled"), true
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return transient("ConnectionFailed"), true
	}
	if errno, ok := err.(syscall.Errno); ok && (errno == syscall.ECONNREFUSED || errno == syscall.ECONNRESET) {
		return transient("ConnectionFailed"), true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return transient("Timeout"), true
	}
	return site.Result{}, false
}

// classifyAfterReauth classifies a request that failed again after
// gophercloud re-authenticated: a 401 then is an access rule refusing it;
// for any other status the retried request's own status decides (ok false).
func classifyAfterReauth(original error) (site.Result, bool) {
	if openstack.StatusCode(original) == http.StatusUnauthorized {
		return permanent("AccessRuleDenied"), true
	}
	return site.Result{}, false
}

// statusClasses maps the HTTP statuses OpenStack answers with that have a
// class of their own; classifyStatus falls back to the status's range.
var statusClasses = map[int]site.Result{
	// Without a successful re-authentication in between (that case is
	// ErrErrorAfterReauthentication): the token was refused.
	http.StatusUnauthorized:       transient("AuthenticationFailed"),
	http.StatusForbidden:          permanent("AccessDenied"),
	http.StatusConflict:           transient("Conflict"),
	http.StatusRequestTimeout:     transient("Timeout"),
	http.StatusTooManyRequests:    transient("RateLimited"),
	http.StatusBadRequest:         permanent("BadRequest"),
	http.StatusNotFound:           permanent("NotFound"),
	http.StatusMethodNotAllowed:   permanent("MethodNotAllowed"),
	http.StatusNotAcceptable:      permanent("NotAcceptable"),
	http.StatusBadGateway:         transient("ServiceUnavailable"),
	http.StatusServiceUnavailable: transient("ServiceUnavailable"),
	http.StatusGatewayTimeout:     transient("ServiceUnavailable"),
}

// classifyStatus classifies an HTTP status OpenStack answered with.
func classifyStatus(code int) site.Result {
	if r, ok := statusClasses[code]; ok {
		return r
	}
	switch {
	case code >= 500:
		return transient("ServerError")
	case code >= 400:
		return permanent("ClientError")
	}
	return transient("Unclassified")
}
