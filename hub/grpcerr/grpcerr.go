package grpcerr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ironlink/ironlink/hub/store"
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
	ReasonMalformedMessage = "MALFORMED_MESSAGE"
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
	// ReasonReplicaDraining: the replica is shutting down (Unavailable);
	// reconnect, the load balancer picks another.
	ReasonReplicaDraining = "REPLICA_DRAINING"
	// ReasonClientRevoked: the link's client left the roster, or its key did
	// (Unauthenticated).
	ReasonClientRevoked = "CLIENT_REVOKED"
	// ReasonHelloTimeout: no hello arrived within the hub's hello timeout
	// (DeadlineExceeded).
	ReasonHelloTimeout = "HELLO_TIMEOUT"
)

// RetryDelay is the RetryInfo delay an Unavailable database suggests.
const RetryDelay = time.Second

// New returns a status error with code, message msg (capped at
// MaxMessageBytes) and an ErrorInfo{Reason: reason, Domain: Domain}; extra
// details follow the ErrorInfo.
func New(code codes.Code, reason, msg string, extra ...protoadapt.MessageV1) error {
	st := status.New(code, textcheck.Prefix(msg, MaxMessageBytes))
	details := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: Domain}}, extra...)
	withDetails, err := st.WithDetails(details...)
	if err != nil { // only when a detail cannot be marshalled: keep the code
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
		return New(codes.InvalidArgument, reason, msg)
	}
	f := textcheck.Prefix(field, 256)
	return New(codes.InvalidArgument, reason, msg, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
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
	return New(codes.NotFound, ReasonNotFound, msg, &errdetails.ResourceInfo{
		ResourceType: resourceType, ResourceName: textcheck.Prefix(name, textcheck.EchoBytes)})
}

// UnknownSite is the NotFound every RPC answers for a site filter or
// argument naming no site the hub knows (an empty list would look like a
// healthy empty site).
func UnknownSite(site string) error {
	return NotFound("site", site, "site "+textcheck.Quote(site)+" not found: no satellite of that name has linked to the hub")
}

// SiteKnown is what a listing calls when it came back empty for a site
// filter: UnknownSite when st does not know site, nil when it does (or
// site is ""), FromStore's error when the lookup fails. Only empty
// listings pay for the lookup.
func SiteKnown(ctx context.Context, st interface {
	SiteExists(ctx context.Context, name string) (bool, error)
}, site string) error {
	if site == "" {
		return nil
	}
	ok, err := st.SiteExists(ctx, site)
	if err != nil {
		return FromStore(err)
	}
	if !ok {
		return UnknownSite(site)
	}
	return nil
}

// PermissionDenied returns codes.PermissionDenied with ErrorInfo reason
// (ReasonWrongSite, ReasonMissingScope, ...).
func PermissionDenied(reason, msg string) error {
	return New(codes.PermissionDenied, reason, msg)
}

// FromStore maps an error returned by hub/store (or by a context) to a
// status error; nil stays nil. The table:
//
//	already a status error               returned unchanged
//	*textcheck.Error                     InvalidArgument for its field (as FromCheck)
//	context.Canceled / DeadlineExceeded  Canceled / DeadlineExceeded
//	store.ErrNotFound                    NotFound, NOT_FOUND (the store's message: "device <uuid>: not found")
//	store.ErrWrongSite                   PermissionDenied, WRONG_SITE (the store's message)
//	store.ErrMismatch                    InvalidArgument, IDS_MISMATCH (the store's message)
//	store.ErrFenced                      Aborted, LINK_SUPERSEDED ("… reconnect")
//	store.ErrNotRetryable                FailedPrecondition, COMMAND_NOT_FAILED (the store's message)
//	PostgreSQL class 22 (data exception:
//	  NUL byte, bad encoding, overflow)  InvalidArgument, INVALID_VALUE: the value is wrong, a retry cannot help
//	anything else                        Unavailable, DATABASE_UNAVAILABLE, RetryInfo 1 s ("database unavailable; retry")
//
// Store messages only name canonical UUIDs and validated site names, so they
// are echoed; a PostgreSQL message is cut to EchoBytes.
func FromStore(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var te *textcheck.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &te):
		return InvalidArgument(te.Field, te.Reason, te.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, store.ErrNotFound):
		return New(codes.NotFound, ReasonNotFound, err.Error())
	case errors.Is(err, store.ErrWrongSite):
		return New(codes.PermissionDenied, ReasonWrongSite, err.Error())
	case errors.Is(err, store.ErrMismatch):
		return New(codes.InvalidArgument, ReasonMismatch, err.Error())
	case errors.Is(err, store.ErrFenced):
		return New(codes.Aborted, ReasonLinkSuperseded, "link superseded by a newer link for this site; reconnect")
	case errors.Is(err, store.ErrNotRetryable):
		return New(codes.FailedPrecondition, ReasonNotRetryable, err.Error())
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
		return New(codes.InvalidArgument, ReasonInvalidValue,
			fmt.Sprintf("a value was refused by the database (SQLSTATE %s: %s)", pgErr.Code, textcheck.Prefix(pgErr.Message, textcheck.EchoBytes)))
	}
	return New(codes.Unavailable, ReasonDatabaseUnavailable, "database unavailable; retry",
		&errdetails.RetryInfo{RetryDelay: durationpb.New(RetryDelay)})
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
