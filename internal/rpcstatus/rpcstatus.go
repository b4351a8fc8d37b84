// Package rpcstatus builds the plain gRPC statuses of ironlink's code outside
// hub/: the satellite's local health door (satellite/healthdoor), which may
// not import hub/grpcerr (hub/ and satellite/ never import each other).
// It also holds the request decode codec both servers install
// (DecodeOptions, decode.go): hub/grpcerr maps its failures to the hub's
// statuses with details, the health door to plain ones (DecodeStatus).
//
// It is one of the two packages allowed to build a status (the other is
// hub/grpcerr, the hub's error map with its ErrorInfo details);
// TestOnlyGrpcerrBuildsStatuses in hub/grpcerr enforces it. The statuses
// here carry no details: a code and a message, as the NVSentinel platform
// connector's clients expect (docs/reference/health.md).
package rpcstatus

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error returns a status error with code and message msg, no details.
func Error(code codes.Code, msg string) error {
	return status.Error(code, msg)
}

// Errorf returns a status error with code and the message format renders
// (fmt.Sprintf), no details.
func Errorf(code codes.Code, format string, args ...any) error {
	return status.Error(code, fmt.Sprintf(format, args...))
}

// FromContext maps a context's error to its status: context.Canceled to
// Canceled, context.DeadlineExceeded to DeadlineExceeded (message: the
// error's text); any other error to Unknown.
func FromContext(err error) error {
	return status.FromContextError(err).Err()
}
