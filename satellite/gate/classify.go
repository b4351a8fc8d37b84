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
)

// Failure classifies an error returned by Apply: whether applying the same
// desired state again, unchanged, can succeed without anyone acting
// (transient: the hub resends after its capped backoff) or cannot
// (permanent: the hub waits for a newer desired state or an operator's
// retry). The zero Failure is transient with no reason.
type Failure struct {
	// Permanent is true when repeating the call fails again until someone
	// acts: the node is gone, the credential or policy refuses the call, or
	// the request itself is refused.
	Permanent bool
	// Reason is one CamelCase word naming the failure (see Classify).
	Reason string
}

// Classify tells a permanent failure of Apply from a transient one, reading
// the OpenStack answer inside err (OPENSTACK.md §3.1, §5.1 and §6; the
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
// is: repeating the call cannot fix that part. Classify(nil) is the zero
// Failure.
func Classify(err error) Failure {
	if err == nil {
		return Failure{}
	}
	var first *Failure
	walk(err, func(e error) bool {
		f, ok := classifyOne(e)
		if !ok {
			return true
		}
		if first == nil || (f.Permanent && !first.Permanent) {
			first = &f
		}
		return !f.Permanent
	})
	if first == nil {
		return Failure{Reason: "Unclassified"}
	}
	return *first
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
func classifyOne(err error) (Failure, bool) {
	switch e := err.(type) {
	case *gophercloud.ErrErrorAfterReauthentication:
		if openstack.StatusCode(e.ErrOriginal) == http.StatusUnauthorized {
			return Failure{Permanent: true, Reason: "AccessRuleDenied"}, true
		}
		return Failure{}, false // the retried request's own status decides
	case gophercloud.ErrErrorAfterReauthentication:
		if openstack.StatusCode(e.ErrOriginal) == http.StatusUnauthorized {
			return Failure{Permanent: true, Reason: "AccessRuleDenied"}, true
		}
		return Failure{}, false
	case *gophercloud.ErrUnableToReauthenticate, gophercloud.ErrUnableToReauthenticate:
		return Failure{Reason: "AuthenticationFailed"}, true
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
		return Failure{Permanent: true, Reason: "NodeNotFound"}, true
	case err == ironic.ErrNodeLocked:
		return Failure{Reason: "NodeLocked"}, true
	case err == placement.ErrGenerationConflict:
		return Failure{Reason: "GenerationConflict"}, true
	case err == openstack.ErrAuthBackoff:
		return Failure{Reason: "AuthenticationFailed"}, true
	case err == context.DeadlineExceeded:
		return Failure{Reason: "Timeout"}, true
	case err == context.Canceled:
		return Failure{Reason: "Canceled"}, true
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return Failure{Reason: "ConnectionFailed"}, true
	}
	if errno, ok := err.(syscall.Errno); ok && (errno == syscall.ECONNREFUSED || errno == syscall.ECONNRESET) {
		return Failure{Reason: "ConnectionFailed"}, true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return Failure{Reason: "Timeout"}, true
	}
	return Failure{}, false
}

// classifyStatus classifies an HTTP status OpenStack answered with.
func classifyStatus(code int) Failure {
	switch code {
	case http.StatusUnauthorized:
		// Without a successful re-authentication in between (that case
		// is ErrErrorAfterReauthentication): the token was refused.
		return Failure{Reason: "AuthenticationFailed"}
	case http.StatusForbidden:
		return Failure{Permanent: true, Reason: "AccessDenied"}
	case http.StatusConflict:
		return Failure{Reason: "Conflict"}
	case http.StatusRequestTimeout:
		return Failure{Reason: "Timeout"}
	case http.StatusTooManyRequests:
		return Failure{Reason: "RateLimited"}
	case http.StatusBadRequest:
		return Failure{Permanent: true, Reason: "BadRequest"}
	case http.StatusNotFound:
		return Failure{Permanent: true, Reason: "NotFound"}
	case http.StatusMethodNotAllowed:
		return Failure{Permanent: true, Reason: "MethodNotAllowed"}
	case http.StatusNotAcceptable:
		return Failure{Permanent: true, Reason: "NotAcceptable"}
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Failure{Reason: "ServiceUnavailable"}
	}
	switch {
	case code >= 500:
		return Failure{Reason: "ServerError"}
	case code >= 400:
		return Failure{Permanent: true, Reason: "ClientError"}
	}
	return Failure{Reason: "Unclassified"}
}
