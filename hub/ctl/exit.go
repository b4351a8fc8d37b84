package ctl

import "fmt"

// Exit codes of `ironlink`.
const (
	// ExitOK: done.
	ExitOK = 0
	// ExitError: anything not listed below (an unexpected hub error).
	ExitError = 1
	// ExitUsage: bad flags, arguments or config; an ambiguous device name;
	// input the hub refused as invalid (InvalidArgument). Nothing changed.
	ExitUsage = 2
	// ExitNotFound: no such device, command, site or context.
	ExitNotFound = 3
	// ExitAuth: the hub refused the identity (Unauthenticated) or the
	// scope (PermissionDenied).
	ExitAuth = 4
	// ExitUnreachable: the hub could not be reached or did not answer in
	// time (connection refused, TLS verification failed, Unavailable,
	// deadline).
	ExitUnreachable = 5
	// ExitCommandFailed: with --wait, a command ended FAILED (the site
	// could not apply it) or SUPERSEDED (a newer one replaced it).
	ExitCommandFailed = 6
	// ExitWaitTimeout: with --wait, a command did not finish within
	// --timeout.
	ExitWaitTimeout = 7
	// ExitRefused: the hub refused the request in the current state
	// (FailedPrecondition: a quarantined device without --force, an
	// operation already running, a precondition of the kind the hub's view
	// of the device fails (provision state, maintenance, instance, power), a selector matching another count than --expected-count, an
	// operation Ironic cannot abort now). Nothing changed.
	ExitRefused = 8
)

// exitCodesHelp is the exit-code table printed by `ironlink --help`.
const exitCodesHelp = `Exit codes:
  0  done
  1  unexpected error
  2  bad flags, arguments, config or input (nothing changed)
  3  not found (device, command, site, context)
  4  the hub refused the identity or its scope
  5  hub unreachable (connection, TLS, timeout)
  6  --wait: a command FAILED or was SUPERSEDED
  7  --wait: a command did not finish within --timeout
  8  refused in the current state (quarantined, busy, wrong state, count mismatch; nothing changed)`

// Error is an error with the exit code it maps to. Msg is printed as
// "error: <Msg>" on stderr.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func usageErr(err error) *Error { return &Error{Code: ExitUsage, Msg: err.Error()} }

func usageErrf(format string, args ...any) *Error {
	return &Error{Code: ExitUsage, Msg: fmt.Sprintf(format, args...)}
}
