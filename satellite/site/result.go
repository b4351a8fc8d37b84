package site

import (
	"errors"
	"fmt"
	"time"
)

// Result is the outcome of one step against the site — a gate write, one
// reconcile pass of an operation — in the style of metal3's provisioner
// results: the step is done; or it is not finished yet or failed in a way
// that trying again can fix (retry after After, transient); or it failed in
// a way that trying the same again cannot fix until someone acts (failed,
// permanent, with a reason). The zero Result is Done.
//
// The agent reports a command's Result as FailureClass TRANSIENT (Retry)
// or PERMANENT (Failed) with its Reason; the operations runner passes again
// after After on Retry and ends the operation FAILED with Reason and
// Message on Failed.
type Result struct {
	// State says which of the three outcomes this is.
	State ResultState
	// After is how long to wait before trying again (Retry only; 0: at
	// once, or as the caller's own backoff decides).
	After time.Duration
	// Reason is one CamelCase word naming why the step is not done
	// ("NodeLocked", "InvalidState", "NodeNotFound"); "" while an
	// operation simply waits for Ironic.
	Reason string
	// Message says what happened, for people (Failed; may be "").
	Message string
}

// ResultState is the kind of a Result.
type ResultState int

// The three outcomes of a step.
const (
	// StateDone: the step reached its goal.
	StateDone ResultState = iota
	// StateRetry: not there yet, or a transient failure; try again after
	// Result.After.
	StateRetry
	// StateFailed: a permanent failure; trying the same again fails again.
	StateFailed
)

// Done is the Result of a step that reached its goal.
func Done() Result { return Result{} }

// RetryAfter is the Result of a step to try again after d (0: at once),
// with reason when it failed transiently ("" while it just waits).
func RetryAfter(d time.Duration, reason string) Result {
	return Result{State: StateRetry, After: d, Reason: reason}
}

// Failed is the permanent Result of a step: reason is one CamelCase word,
// the message is format and args as fmt.Sprintf.
func Failed(reason, format string, args ...any) Result {
	return Result{State: StateFailed, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// IsDone reports whether the step reached its goal.
func (r Result) IsDone() bool { return r.State == StateDone }

// Permanent reports whether the step failed for good (StateFailed).
func (r Result) Permanent() bool { return r.State == StateFailed }

// Err returns r as an error (a *ResultError) when it failed, nil otherwise,
// for a step that returns errors through helpers; AsResult recovers it.
func (r Result) Err() error {
	if r.State != StateFailed {
		return nil
	}
	return &ResultError{Result: r}
}

// String renders r for logs and test failures, e.g. "failed InvalidState:
// node n1 is active", "retry after 2s", "done".
func (r Result) String() string {
	switch r.State {
	case StateDone:
		return "done"
	case StateRetry:
		s := "retry after " + r.After.String()
		if r.Reason != "" {
			s += " (" + r.Reason + ")"
		}
		return s
	}
	return "failed " + r.Reason + ": " + r.Message
}

// ResultError carries a failed Result through code that returns errors.
type ResultError struct{ Result Result }

// Error is "Reason: Message".
func (e *ResultError) Error() string { return e.Result.Reason + ": " + e.Result.Message }

// AsResult returns the Result err carries (a *ResultError anywhere in its
// chain), and whether it carries one.
func AsResult(err error) (Result, bool) {
	var re *ResultError
	if errors.As(err, &re) {
		return re.Result, true
	}
	return Result{}, false
}
