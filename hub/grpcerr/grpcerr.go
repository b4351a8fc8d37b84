package grpcerr

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/ironlink/ironlink/internal/rpcstatus"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Domain is the google.rpc.ErrorInfo domain of every status made here.
const Domain = "ironlink.v1"

// MaxMessageBytes caps a status message (longer ones are cut, see
// textcheck.Prefix).
const MaxMessageBytes = 1024

// Stable ErrorInfo reasons (UPPER_SNAKE; clients may switch on them, so
// they are never renamed). textcheck's reasons (FIELD_TOO_LONG,
// INVALID_UTF8, CONTROL_CHARACTER) are used as they are.
const (
	// ReasonRequired: a required field is empty.
	ReasonRequired = "FIELD_REQUIRED"
	// ReasonNotUUID: an id field is not a UUID.
	ReasonNotUUID = "NOT_A_UUID"
	// ReasonOutOfRange: a number is outside its range.
	ReasonOutOfRange = "OUT_OF_RANGE"
	// ReasonInvalidValue: a value is not one the field accepts (an enum
	// value, a site name, a page token, ...).
	ReasonInvalidValue = "INVALID_VALUE"
	// ReasonMalformedMessage: the request could not be decoded at all.
	ReasonMalformedMessage = rpcstatus.ReasonMalformedMessage
	// ReasonTooLong, ReasonInvalidUTF8, ReasonControlChar: as textcheck's.
	ReasonTooLong     = textcheck.ReasonTooLong
	ReasonInvalidUTF8 = textcheck.ReasonInvalidUTF8
	ReasonControlChar = textcheck.ReasonControlChar

	// ReasonNotFound: the named device, command or site does not exist.
	ReasonNotFound = "NOT_FOUND"
	// ReasonWrongSite: the caller named something of another site.
	ReasonWrongSite = "WRONG_SITE"
	// ReasonMismatch: the caller named ids that do not belong together (a
	// command result naming another device than the command's).
	ReasonMismatch = "IDS_MISMATCH"
	// ReasonMissingScope: the caller lacks the scope the call needs.
	ReasonMissingScope = "MISSING_SCOPE"
	// ReasonLinkSuperseded: a newer link for the site exists; reconnect.
	ReasonLinkSuperseded = "LINK_SUPERSEDED"
	// ReasonDatabaseUnavailable: the hub cannot reach PostgreSQL; retry.
	ReasonDatabaseUnavailable = "DATABASE_UNAVAILABLE"
	// ReasonNotRetryable: RetryCommand named a command that is not FAILED.
	ReasonNotRetryable = "COMMAND_NOT_FAILED"
	// ReasonHeldByOthers: a release by a caller that holds no quarantine of
	// the device while other sources (policy rules) do.
	ReasonHeldByOthers = "HELD_BY_OTHERS"
	// ReasonQuarantined: an offer of a device that is quarantined.
	ReasonQuarantined = "QUARANTINED"
	// ReasonReplicaDraining: the replica is shutting down (Unavailable);
	// reconnect, the load balancer picks another.
	ReasonReplicaDraining = "REPLICA_DRAINING"
	// ReasonClientRevoked: the link's client left the roster, or its key did
	// (Unauthenticated).
	ReasonClientRevoked = "CLIENT_REVOKED"
	// ReasonHelloTimeout: no hello arrived within the hub's hello timeout
	// (DeadlineExceeded).
	ReasonHelloTimeout = "HELLO_TIMEOUT"

	// ReasonOperationActive: the device (or, for ENROL, the node name)
	// already has a PENDING or RUNNING operation (FailedPrecondition).
	ReasonOperationActive = "OPERATION_ACTIVE"
	// ReasonOperationFinished: cancel of a finished operation
	// (FailedPrecondition).
	ReasonOperationFinished = "OPERATION_FINISHED"
	// ReasonNotAbortable: cancel of a RUNNING operation whose node is not
	// in a provision state Ironic aborts from (FailedPrecondition).
	ReasonNotAbortable = "NOT_ABORTABLE"
	// ReasonNotPending: an approve or reject of a pending action that is no
	// longer pending (FailedPrecondition).
	ReasonNotPending = "PENDING_ACTION_NOT_PENDING"
	// ReasonAmbiguousDevice: a health event's node name maps to several
	// devices of the site; the message names them (FailedPrecondition).
	ReasonAmbiguousDevice = "AMBIGUOUS_DEVICE"
	// ReasonCountMismatch: a bulk call's selector matched another number of
	// devices than expected_count (FailedPrecondition; metadata "matched",
	// "expected").
	ReasonCountMismatch = "BULK_COUNT_MISMATCH"
	// ReasonTooManyDevices: a bulk call's selector matched more than
	// store.MaxBulkDevices devices (FailedPrecondition).
	ReasonTooManyDevices = "BULK_TOO_MANY_DEVICES"
	// ReasonDeviceNameAmbiguous: a device name several devices share
	// (InvalidArgument).
	ReasonDeviceNameAmbiguous = "DEVICE_NAME_AMBIGUOUS"
	// ReasonRateLimited: an operator client's calls came faster than its
	// rate and burst allow (ResourceExhausted, RetryInfo).
	ReasonRateLimited = "RATE_LIMITED"
	// ReasonTooManyStreams: an operator client already holds its limit of
	// streams open (ResourceExhausted).
	ReasonTooManyStreams = "TOO_MANY_STREAMS"
	// ReasonMessageTooLarge: a request is larger than its service allows
	// (ResourceExhausted; hub/admission's per-service limits).
	ReasonMessageTooLarge = rpcstatus.ReasonMessageTooLarge
	// ReasonWatchFellBehind: a WatchFleet stream ended because its consumer
	// took no message for the hub's --watch-send-timeout
	// (ResourceExhausted; ErrorInfo metadata "cursor" is the cursor to
	// resume from).
	ReasonWatchFellBehind = "WATCH_FELL_BEHIND"
	// ReasonHandoffClosed: CloseHandoff of a repair handoff that is closed
	// already (FailedPrecondition).
	ReasonHandoffClosed = "HANDOFF_CLOSED"
	// ReasonValidationRequired: an offer of a device in the validation
	// pool without a passed validation run (FailedPrecondition).
	ReasonValidationRequired = "VALIDATION_REQUIRED"
	// ReasonRunFinished: a result for a validation run that passed or
	// failed already (FailedPrecondition).
	ReasonRunFinished = "RUN_FINISHED"
)

// HandoffClosed is the FailedPrecondition of a CloseHandoff whose handoff
// was closed already (msg: the store's message, which names its id).
func HandoffClosed(msg string) error {
	return newStatus(codes.FailedPrecondition, ReasonHandoffClosed, msg)
}

// RetryDelay is the RetryInfo delay an Unavailable database suggests.
const RetryDelay = time.Second

// newStatus returns a status error with code, message msg (capped at
// MaxMessageBytes) and an ErrorInfo{Reason: reason, Domain: Domain}; extra
// details follow the ErrorInfo. The exported constructors fix the code.
func newStatus(code codes.Code, reason, msg string, extra ...protoadapt.MessageV1) error {
	details := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: Domain}}, extra...)
	return build(code, textcheck.Prefix(msg, MaxMessageBytes), details...)
}

// build returns a status error with code, message msg as given (the caller
// caps it) and details in order; when a detail cannot be marshalled (a
// string that is not valid UTF-8), the status without details, so the code
// is kept.
func build(code codes.Code, msg string, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	if len(details) == 0 {
		return st.Err()
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		return st.Err()
	}
	return withDetails.Err()
}

// InvalidArgument returns codes.InvalidArgument for field (a proto field
// path such as "reason" or "batch.devices[3].device_id"; "" when no one
// field is at fault) with ErrorInfo reason and, when field is set, a
// BadRequest field violation {field, msg}. msg should name the field and
// never contain unbounded input (use textcheck.Quote).
func InvalidArgument(field, reason, msg string) error {
	if field == "" {
		return newStatus(codes.InvalidArgument, reason, msg)
	}
	f := textcheck.Prefix(field, 256)
	return newStatus(codes.InvalidArgument, reason, msg, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
		Field: f, Description: textcheck.Prefix(msg, MaxMessageBytes), Reason: reason,
	}}})
}

// FromCheck turns a *textcheck.Error into InvalidArgument for its field.
// Any other error goes through FromStore.
func FromCheck(err error) error {
	var te *textcheck.Error
	if errors.As(err, &te) {
		return InvalidArgument(te.Field, te.Reason, te.Error())
	}
	return FromStore(err)
}

// NotFound returns codes.NotFound for the resource of resourceType
// ("device", "command", "site") named name, with a ResourceInfo and
// ErrorInfo reason NOT_FOUND. name is echoed through textcheck.Quote.
func NotFound(resourceType, name, msg string) error {
	if msg == "" {
		msg = fmt.Sprintf("%s %s not found", resourceType, textcheck.Quote(name))
	}
	return newStatus(codes.NotFound, ReasonNotFound, msg, &errdetails.ResourceInfo{
		ResourceType: resourceType, ResourceName: textcheck.Prefix(name, textcheck.EchoBytes)})
}

// UnknownSite is the NotFound every RPC answers for a site filter or
// argument naming no site the hub knows (an empty list would look like a
// healthy empty site).
func UnknownSite(site string) error {
	return NotFound("site", site, "site "+textcheck.Quote(site)+" not found: no satellite of that name has linked to the hub")
}

// PermissionDenied returns codes.PermissionDenied with ErrorInfo reason
// (ReasonWrongSite, ReasonMissingScope, ...).
func PermissionDenied(reason, msg string) error {
	return newStatus(codes.PermissionDenied, reason, msg)
}

// FailedPrecondition returns codes.FailedPrecondition with ErrorInfo reason:
// the call is well formed but the state of what it names refuses it (an
// operation already active, a node in use, ...); msg says what to do.
func FailedPrecondition(reason, msg string) error {
	return newStatus(codes.FailedPrecondition, reason, msg)
}

// ResourceExhausted returns codes.ResourceExhausted with ErrorInfo reason:
// a limit of the hub was reached (a batch larger than the link allows, the
// credentials held in memory); msg names the limit.
func ResourceExhausted(reason, msg string) error {
	return newStatus(codes.ResourceExhausted, reason, msg)
}

// Reason returns the ErrorInfo reason of a status error made here ("" when
// it has none): what a client or a test switches on.
func Reason(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason()
		}
	}
	return ""
}

// Fields returns the field paths of a status error's BadRequest field
// violations, in order (nil when it has none).
func Fields(err error) []string {
	st, _ := status.FromError(err)
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	return fields
}
