package grpcerr

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ironlink/ironlink/internal/textcheck"
)

// The named statuses: one function per answer that is not a domain error of
// hub/store (errmap.go) nor a generic constructor (grpcerr.go).

// ReplicaDraining is the Unavailable (ReasonReplicaDraining) of a link or
// hello refused because this hub replica is shutting down: the satellite
// reconnects and the load balancer picks another replica.
func ReplicaDraining() error {
	return newStatus(codes.Unavailable, ReasonReplicaDraining, "hub replica draining; reconnect")
}

// ClientRevoked is the Unauthenticated (ReasonClientRevoked) that ends a
// link whose client left the hub's roster, or whose key did.
func ClientRevoked() error {
	return newStatus(codes.Unauthenticated, ReasonClientRevoked, "client removed from the hub's roster")
}

// HelloTimeout is the DeadlineExceeded (ReasonHelloTimeout) of a link whose
// hello did not arrive within the hub's hello timeout.
func HelloTimeout() error {
	return newStatus(codes.DeadlineExceeded, ReasonHelloTimeout, "no hello within the hello timeout")
}

// RateLimited is the ResourceExhausted (ReasonRateLimited) of an operator
// call over its client's rate: message msg, and a RetryInfo of retryAfter
// (at least 1 ms), when the next call is allowed.
func RateLimited(msg string, retryAfter time.Duration) error {
	return newStatus(codes.ResourceExhausted, ReasonRateLimited, msg,
		&errdetails.RetryInfo{RetryDelay: durationpb.New(max(retryAfter, time.Millisecond))})
}

// TooManyStreams is the ResourceExhausted (ReasonTooManyStreams) of a
// stream refused because client already holds n streams open, its limit.
func TooManyStreams(client string, n int) error {
	return newStatus(codes.ResourceExhausted, ReasonTooManyStreams,
		fmt.Sprintf("client %s already holds %d streams open, its limit; close one and retry", client, n))
}

// WatchFellBehind is the ResourceExhausted (ReasonWatchFellBehind) that
// ends a WatchFleet stream whose consumer took no message for waited (the
// hub's --watch-send-timeout): ErrorInfo metadata "cursor" is cursor, that
// of the last message the consumer gets before this status, to resume
// from with no gap (empty when none was sent).
func WatchFellBehind(cursor string, waited time.Duration) error {
	return build(codes.ResourceExhausted,
		fmt.Sprintf("this watch fell behind: the hub could not send it a change for %s (the consumer is not reading); resume with cursor %q", waited, cursor),
		&errdetails.ErrorInfo{Reason: ReasonWatchFellBehind, Domain: Domain, Metadata: map[string]string{"cursor": cursor}})
}

// TokenCheckUnavailable is the Unavailable (ReasonDatabaseUnavailable,
// RetryInfo RetryDelay) of a call whose bearer token could not be checked
// because the replay check in PostgreSQL failed.
func TokenCheckUnavailable() error {
	return newStatus(codes.Unavailable, ReasonDatabaseUnavailable,
		"the hub cannot verify tokens right now: its replay check in PostgreSQL failed (database unavailable); retry",
		&errdetails.RetryInfo{RetryDelay: durationpb.New(RetryDelay)})
}

// Unauthenticated is a bare codes.Unauthenticated with message msg (no
// details, not capped): the refusal of a bearer token or of a client
// certificate that does not match the token's client. msg comes from the
// hub's own checks (auth.VerifyError), never the raw token.
func Unauthenticated(msg string) error {
	return status.Error(codes.Unauthenticated, msg)
}

// Internal is a bare codes.Internal with message msg (no details): a fault
// of the hub (a handler panicked, a validated value could not be encoded).
// msg never echoes input.
func Internal(msg string) error {
	return status.Error(codes.Internal, msg)
}

// AmbiguousDeviceName is the InvalidArgument (ReasonDeviceNameAmbiguous) of
// a device_name several devices share: message msg (capped at
// MaxMessageBytes), ErrorInfo metadata "candidates" (the "site/device_id"
// pairs, comma-separated) and a BadRequest on field device_name.
func AmbiguousDeviceName(msg string, candidates []string) error {
	msg = textcheck.Prefix(msg, MaxMessageBytes)
	return build(codes.InvalidArgument, msg,
		&errdetails.ErrorInfo{Reason: ReasonDeviceNameAmbiguous, Domain: Domain, Metadata: map[string]string{"candidates": strings.Join(candidates, ",")}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "device_name", Description: msg, Reason: ReasonDeviceNameAmbiguous}}})
}

// DeviceNameNotFound is the NotFound (ReasonNotFound) of a device_name no
// device has: message msg, ErrorInfo metadata "suggestions" (similar names,
// comma-separated; may be empty) and a ResourceInfo naming the device. When
// the details cannot be marshalled, NotFound("device", name, msg).
func DeviceNameNotFound(name, msg string, suggestions []string) error {
	st, err := status.New(codes.NotFound, msg).WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonNotFound, Domain: Domain, Metadata: map[string]string{"suggestions": strings.Join(suggestions, ",")}},
		&errdetails.ResourceInfo{ResourceType: "device", ResourceName: name})
	if err != nil {
		return NotFound("device", name, msg)
	}
	return st.Err()
}
