package openstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gophercloud/gophercloud/v2"
)

// ErrAuthBackoff is returned instead of asking Keystone for a token while
// the guard waits after a failed (re-)authentication.
var ErrAuthBackoff = errors.New("openstack: not asking Keystone for a token yet (backing off after a failure)")

// IsAuthBackoff reports whether err is a request refused locally because
// the guard is backing off (gophercloud's ErrUnableToReauthenticate does
// not unwrap to the reauthentication error, so it is looked into here).
func IsAuthBackoff(err error) bool {
	if errors.Is(err, ErrAuthBackoff) {
		return true
	}
	var ure *gophercloud.ErrUnableToReauthenticate
	if errors.As(err, &ure) {
		return errors.Is(ure.ErrReauth, ErrAuthBackoff)
	}
	return false
}

// AuthState is what the guard knows about the credential.
type AuthState struct {
	// Status: "True" (Keystone issued a token), "False" (Keystone answered
	// 401: expired, deleted or rotated application credential, or access
	// rules refused; or clouds.yaml is incomplete), "Unknown" (Keystone
	// could not be reached).
	Status string
	// Reason is "Authenticated", "AuthenticationFailed",
	// "KeystoneUnreachable" or [ReasonConfigInvalid].
	Reason string
	// Message is the last error, or "" when authenticated.
	Message string
	// Failures counts consecutive failed token requests.
	Failures int
	// NextAttempt is the earliest time of the next token request after a
	// failure; zero when authenticated.
	NextAttempt time.Time
}

// ReasonConfigInvalid is the AuthState reason (status False) of a
// configuration that cannot authenticate whatever Keystone says: clouds.yaml
// unreadable, the cloud missing, or auth options incomplete (an error
// wrapping [ErrConfig]). No token request was made; none is retried, and
// no backoff is set: the satellite must be restarted with a fixed file.
const ReasonConfigInvalid = "ConfigInvalid"

// AuthGuard wraps a provider client's ReauthFunc so that a refused or
// unreachable Keystone is asked again only with exponential backoff (30 s
// doubling to 10 min, ±50 % jitter) instead of on every request, and every
// change of AuthState is reported (SPEC "Identity and access": a Keystone
// 401 is reported as such, never a crash loop or a storm of token
// requests). Requests made while it backs off fail at once with an error
// wrapping ErrAuthBackoff (and the 401 that caused it, inside gophercloud's
// ErrUnableToReauthenticate).
type AuthGuard struct {
	// OnChange, when set, is called (without locks held) with the new state
	// whenever Status or Reason changes. Set it before Install.
	OnChange func(AuthState)
	// OnTokenRequest, when set, is called after every token request the
	// guard lets through, with its error (nil on success).
	OnTokenRequest func(error)
	// InitialInterval and MaxInterval bound the waits; zero means 30 s and
	// 10 min.
	InitialInterval, MaxInterval time.Duration

	log  *slog.Logger
	orig func(context.Context) error
	now  func() time.Time

	mu     sync.Mutex
	state  AuthState
	bo     *backoff.ExponentialBackOff
	method AuthMethod // how clouds.yaml authenticates, for log hints
}

// setMethod records how the cloud authenticates (Connect, after Check), so
// the hints logged after a failure fit the credential actually configured.
func (g *AuthGuard) setMethod(m AuthMethod) {
	g.mu.Lock()
	g.method = m
	g.mu.Unlock()
}

// NewAuthGuard returns a guard that has seen no token request yet (State
// has an empty Status until the first outcome is recorded).
func NewAuthGuard(log *slog.Logger) *AuthGuard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &AuthGuard{log: log, now: time.Now}
}

// Install wraps pc.ReauthFunc (set by gophercloud when AllowReauth is on);
// it does nothing when pc has none.
func (g *AuthGuard) Install(pc *gophercloud.ProviderClient) {
	if pc.ReauthFunc == nil {
		return
	}
	g.orig = pc.ReauthFunc
	pc.ReauthFunc = g.reauth
}

// State returns the current state.
func (g *AuthGuard) State() AuthState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// Observe records the outcome of a token request made outside the guard
// (the first authentication in Connect).
func (g *AuthGuard) Observe(err error) { g.record(err) }

func (g *AuthGuard) reauth(ctx context.Context) error {
	g.mu.Lock()
	if next := g.state.NextAttempt; !next.IsZero() && g.now().Before(next) {
		st := g.state
		g.mu.Unlock()
		return fmt.Errorf("%w: next attempt at %s; last error: %s", ErrAuthBackoff, next.UTC().Format(time.RFC3339), st.Message)
	}
	g.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	err := g.orig(tctx)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return err // shutting down: not Keystone's answer
	}
	// A caller's deadline that ran out while Keystone did not answer is
	// Keystone not answering: recorded (Unknown/KeystoneUnreachable, backoff).
	g.record(err)
	return err
}

// tokenTimeout bounds one token request made through the guard.
const tokenTimeout = 30 * time.Second

// Wait blocks until the guard allows the next token request (at once when
// it is not backing off) or ctx ends; it returns ctx's error then.
func (g *AuthGuard) Wait(ctx context.Context) error {
	g.mu.Lock()
	next := g.state.NextAttempt
	g.mu.Unlock()
	d := time.Until(next)
	if next.IsZero() || d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *AuthGuard) record(err error) {
	configErr := errors.Is(err, ErrConfig)
	if g.OnTokenRequest != nil && !configErr { // no token was asked for
		g.OnTokenRequest(err)
	}
	g.mu.Lock()
	old := g.state
	method := g.method
	if configErr {
		g.state = AuthState{Status: "False", Reason: ReasonConfigInvalid, Message: err.Error(), Failures: old.Failures + 1}
	} else if err == nil {
		g.state = AuthState{Status: "True", Reason: "Authenticated"}
		g.bo = nil
	} else {
		if g.bo == nil {
			g.bo = backoff.NewExponentialBackOff()
			g.bo.InitialInterval = orDefault(g.InitialInterval, 30*time.Second)
			g.bo.MaxInterval = orDefault(g.MaxInterval, 10*time.Minute)
			g.bo.RandomizationFactor = 0.5
			g.bo.Multiplier = 2
			g.bo.Reset()
		}
		st := AuthState{Status: "Unknown", Reason: "KeystoneUnreachable", Message: err.Error(), Failures: old.Failures + 1}
		if StatusCode(err) == http.StatusUnauthorized || IsAuthError(err) {
			st.Status, st.Reason = "False", "AuthenticationFailed"
		}
		st.NextAttempt = g.now().Add(g.bo.NextBackOff())
		g.state = st
	}
	st := g.state
	g.mu.Unlock()
	if st.Status != old.Status || st.Reason != old.Reason {
		switch {
		case st.Status == "True" && old.Status != "":
			g.log.Info("Keystone accepts the credential again", "after_failures", old.Failures)
		case st.Status == "True":
			// The first token: Connect logs it.
		case configErr:
			g.log.Error("clouds.yaml cannot authenticate: not asking Keystone; fix it and restart the satellite",
				"reason", st.Reason, "err", err)
		default:
			g.log.Error("Keystone token request failed; backing off ("+method.checkHint()+")",
				"reason", st.Reason, "auth_method", string(method), "err", err, "next_attempt", st.NextAttempt)
		}
		if g.OnChange != nil {
			g.OnChange(st)
		}
	} else if err != nil {
		g.log.Warn("Keystone token request failed again; backing off", "reason", st.Reason, "failures", st.Failures, "next_attempt", st.NextAttempt)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
