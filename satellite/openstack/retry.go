package openstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gophercloud/gophercloud/v2"
)

// RetryPolicy bounds how often and how long one logical call is retried.
// Waits grow exponentially from InitialInterval to MaxInterval with ±50 %
// jitter (backoff/v5 ExponentialBackOff). The zero value makes exactly one
// attempt.
type RetryPolicy struct {
	// InitialInterval is the first wait; 0 means 250 ms.
	InitialInterval time.Duration
	// MaxInterval caps each wait; 0 means 5 s.
	MaxInterval time.Duration
	// Budget caps the time of all attempts and waits together; no new
	// attempt starts whose wait would cross it. 0 means no time limit.
	Budget time.Duration
	// MaxAttempts caps the number of attempts (first try included); 0 or 1
	// means one attempt.
	MaxAttempts int
	// AttemptTimeout is the deadline of each single attempt; an attempt that
	// runs into it counts as a transient failure. 0 means none (the caller's
	// context still applies).
	AttemptTimeout time.Duration
}

// DefaultRetryPolicy is the policy for reads and idempotent writes: up to 6
// attempts within 45 s, waits 0.5 s → 8 s, 30 s per attempt.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		InitialInterval: 500 * time.Millisecond,
		MaxInterval:     8 * time.Second,
		Budget:          45 * time.Second,
		MaxAttempts:     6,
		AttemptTimeout:  30 * time.Second,
	}
}

// RetryError is returned by [Retry] when it gives up after more than one
// attempt. It unwraps to the last attempt's error, so errors.Is/As and
// gophercloud.ResponseCodeIs still see the HTTP status.
type RetryError struct {
	// Op names the logical call, e.g. "ironic: list nodes page 2".
	Op string
	// Attempts is the number of attempts made.
	Attempts int
	// Elapsed is the time spent, waits included.
	Elapsed time.Duration
	// Err is the last attempt's error.
	Err error
}

// Error describes the operation, attempts, time spent and last error.
func (e *RetryError) Error() string {
	return fmt.Sprintf("%s: gave up after %d attempts in %s: %v", e.Op, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Err)
}

// Unwrap returns the last attempt's error.
func (e *RetryError) Unwrap() error { return e.Err }

// Retry runs fn until it succeeds, returns an error that retryable rejects,
// or p is exhausted; it waits with jittered exponential backoff between
// attempts and stops at once when ctx ends. retryable nil means
// [IsTransient]. Each attempt gets its own context bounded by
// p.AttemptTimeout; an attempt that hits that deadline (while ctx is still
// live) is always retryable. It returns fn's value, the number of attempts
// made and, on failure, the last error — wrapped in a [*RetryError] when
// more than one attempt was made.
func Retry[T any](ctx context.Context, p RetryPolicy, log *slog.Logger, op string, retryable func(error) bool, fn func(ctx context.Context) (T, error)) (T, int, error) {
	if retryable == nil {
		retryable = IsTransient
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.InitialInterval
	if b.InitialInterval <= 0 {
		b.InitialInterval = 250 * time.Millisecond
	}
	b.MaxInterval = p.MaxInterval
	if b.MaxInterval <= 0 {
		b.MaxInterval = 5 * time.Second
	}
	b.RandomizationFactor = 0.5
	b.Multiplier = 2
	maxTries := p.MaxAttempts
	if maxTries < 1 {
		maxTries = 1
	}
	start := time.Now()
	attempts := 0
	v, err := backoff.Retry(ctx, func() (T, error) {
		attempts++
		actx, cancel := ctx, context.CancelFunc(func() {})
		if p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, p.AttemptTimeout)
		}
		defer cancel()
		v, err := fn(actx)
		if err == nil {
			return v, nil
		}
		attemptTimedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		if ctx.Err() != nil || (!attemptTimedOut && !retryable(err)) {
			return v, backoff.Permanent(err)
		}
		return v, err
	},
		backoff.WithBackOff(b),
		backoff.WithMaxTries(uint(maxTries)),
		backoff.WithMaxElapsedTime(p.Budget),
		backoff.WithNotify(func(err error, wait time.Duration) {
			log.Warn("openstack call failed, retrying", "op", op, "attempt", attempts, "wait", wait.Round(time.Millisecond), "err", err)
		}),
	)
	if err != nil && attempts > 1 {
		return v, attempts, &RetryError{Op: op, Attempts: attempts, Elapsed: time.Since(start), Err: err}
	}
	return v, attempts, err
}

// StatusCode returns the HTTP status of a gophercloud error
// (ErrUnexpectedResponseCode, also through ErrErrorAfterReauthentication and
// %w wrapping), or 0 when err carries none.
func StatusCode(err error) int {
	var e gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &e) {
		return e.Actual
	}
	var pe *gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &pe) && pe != nil {
		return pe.Actual
	}
	return 0
}

// ResponseBody returns the response body of a gophercloud HTTP error, or nil.
func ResponseBody(err error) []byte {
	var e gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &e) {
		return e.Body
	}
	var pe *gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &pe) && pe != nil {
		return pe.Body
	}
	return nil
}

// IsTransient reports whether err is worth retrying for a read or an
// idempotent write: HTTP 502, 503 or 504, a network timeout, a refused or
// reset connection, or a connection closed mid-response. 409 is not
// transient here; the callers that can retry it (NodeLocked, Placement
// generation conflicts) decide that themselves.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	switch StatusCode(err) {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 0:
	default:
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// IsAuthError reports whether err means the credential was refused: a 401
// that survived re-authentication, or a failed re-authentication. The
// satellite reports these as AuthenticationFailed (SPEC "Identity and
// access") rather than retrying in a loop.
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	var ure *gophercloud.ErrUnableToReauthenticate
	if errors.As(err, &ure) {
		return true
	}
	return StatusCode(err) == http.StatusUnauthorized
}
