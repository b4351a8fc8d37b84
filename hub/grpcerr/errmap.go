package grpcerr

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// The map from domain errors to statuses: the sentinel and typed errors of
// hub/store (and context errors) become codes here and nowhere else.

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
//	store.ErrHeldByOthers                FailedPrecondition, HELD_BY_OTHERS (the store's message)
//	store.ErrQuarantined                 FailedPrecondition, QUARANTINED (the store's message)
//	store.ErrOperationActive             FailedPrecondition, OPERATION_ACTIVE (the store's message + ": wait for it to finish or cancel it")
//	store.ErrOperationFinished           FailedPrecondition, OPERATION_FINISHED (the store's message)
//	store.ErrValidationRequired          FailedPrecondition, VALIDATION_REQUIRED (the store's message)
//	store.ErrRunFinished                 FailedPrecondition, RUN_FINISHED (the store's message)
//	store.ErrCheckNotRequired            InvalidArgument on check (the store's message)
//	store.ErrNotCancellable              FailedPrecondition, NOT_ABORTABLE (the message of err, which
//	                                       hub/operations extends with the states Ironic aborts from)
//	store.ErrNotPending                  FailedPrecondition, PENDING_ACTION_NOT_PENDING (the store's message)
//	store.ErrAmbiguous                   FailedPrecondition, AMBIGUOUS_DEVICE (the store's message: node and candidates)
//	store.ErrHistoryExpired              InvalidArgument on as_of, OUT_OF_RANGE (the store's message + " (hub flag --history-retention)")
//	store.ErrAsOfUnsupported             InvalidArgument on instance_mismatch, INVALID_VALUE ("… cannot be combined with as_of …")
//	PostgreSQL class 22 (data exception:
//	  NUL byte, bad encoding, overflow)  InvalidArgument, INVALID_VALUE: the value is wrong, a retry cannot help
//	anything else                        Unavailable, DATABASE_UNAVAILABLE, RetryInfo 1 s ("database unavailable; retry")
//
// The bulk refusals (store.ErrCountMismatch, store.ErrTooManyDevices) need
// the caller's selector: see FromBulk. A NotFound naming the resource: see
// FromStoreNamed.
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
		return FromContext(err)
	case errors.Is(err, store.ErrNotFound):
		return newStatus(codes.NotFound, ReasonNotFound, err.Error())
	case errors.Is(err, store.ErrWrongSite):
		return newStatus(codes.PermissionDenied, ReasonWrongSite, err.Error())
	case errors.Is(err, store.ErrMismatch):
		return newStatus(codes.InvalidArgument, ReasonMismatch, err.Error())
	case errors.Is(err, store.ErrFenced):
		return LinkSuperseded()
	case errors.Is(err, store.ErrNotRetryable):
		return newStatus(codes.FailedPrecondition, ReasonNotRetryable, err.Error())
	case errors.Is(err, store.ErrHeldByOthers):
		return newStatus(codes.FailedPrecondition, ReasonHeldByOthers, err.Error())
	case errors.Is(err, store.ErrQuarantined):
		return newStatus(codes.FailedPrecondition, ReasonQuarantined, err.Error())
	case errors.Is(err, store.ErrOperationActive):
		return newStatus(codes.FailedPrecondition, ReasonOperationActive, err.Error()+": wait for it to finish or cancel it")
	case errors.Is(err, store.ErrOperationFinished):
		return newStatus(codes.FailedPrecondition, ReasonOperationFinished, err.Error())
	case errors.Is(err, store.ErrValidationRequired):
		return newStatus(codes.FailedPrecondition, ReasonValidationRequired, err.Error())
	case errors.Is(err, store.ErrRunFinished):
		return newStatus(codes.FailedPrecondition, ReasonRunFinished, err.Error())
	case errors.Is(err, store.ErrCheckNotRequired):
		return InvalidArgument("check", ReasonInvalidValue, err.Error())
	case errors.Is(err, store.ErrNotCancellable):
		return newStatus(codes.FailedPrecondition, ReasonNotAbortable, err.Error())
	case errors.Is(err, store.ErrNotPending):
		return newStatus(codes.FailedPrecondition, ReasonNotPending, err.Error())
	case errors.Is(err, store.ErrAmbiguous):
		return newStatus(codes.FailedPrecondition, ReasonAmbiguousDevice, textcheck.Prefix(err.Error(), 1024))
	case errors.Is(err, store.ErrHistoryExpired):
		return InvalidArgument("as_of", ReasonOutOfRange, err.Error()+" (hub flag --history-retention)")
	case errors.Is(err, store.ErrAsOfUnsupported):
		return InvalidArgument("instance_mismatch", ReasonInvalidValue, "instance_mismatch cannot be combined with as_of: facts have no history")
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
		return newStatus(codes.InvalidArgument, ReasonInvalidValue,
			fmt.Sprintf("a value was refused by the database (SQLSTATE %s: %s)", pgErr.Code, textcheck.Prefix(pgErr.Message, textcheck.EchoBytes)))
	}
	return newStatus(codes.Unavailable, ReasonDatabaseUnavailable, "database unavailable; retry",
		&errdetails.RetryInfo{RetryDelay: durationpb.New(RetryDelay)})
}

// FromStoreNamed is FromStore, except that store.ErrNotFound becomes
// NotFound(resourceType, name, the store's message), with a ResourceInfo
// naming the resource, when resourceType ("device", "command",
// "operation") is set.
func FromStoreNamed(err error, resourceType, name string) error {
	if errors.Is(err, store.ErrNotFound) && resourceType != "" {
		return NotFound(resourceType, name, err.Error())
	}
	return FromStore(err)
}

// FromContext maps a context's error to its status: context.Canceled to
// Canceled, context.DeadlineExceeded to DeadlineExceeded (message: the
// error's text); any other error to Unknown.
func FromContext(err error) error {
	return status.FromContextError(err).Err()
}

// LinkSuperseded is the Aborted (ReasonLinkSuperseded) that ends a link
// when a newer link of its site exists, whether the database fenced it
// (store.ErrFenced) or the hub replica saw the newer link itself.
func LinkSuperseded() error {
	return newStatus(codes.Aborted, ReasonLinkSuperseded, "link superseded by a newer link for this site; reconnect")
}

// FromBulk maps the refusal of a bulk call whose selector (as the caller
// wrote it) matched the wrong devices:
//
//	*store.CountMismatchError  FailedPrecondition, BULK_COUNT_MISMATCH, metadata "matched" and "expected" (counts)
//	store.ErrTooManyDevices    FailedPrecondition, BULK_TOO_MANY_DEVICES (the limit, store.MaxBulkDevices)
//
// Any other error goes through FromStore.
func FromBulk(err error, selector string) error {
	var mismatch *store.CountMismatchError
	switch {
	case errors.As(err, &mismatch):
		return build(codes.FailedPrecondition, fmt.Sprintf("selector %s matches %d devices, not the expected %d: nothing was changed; preview again and pass the new count if it is right",
			textcheck.Quote(selector), mismatch.Matched, mismatch.Expected),
			&errdetails.ErrorInfo{Reason: ReasonCountMismatch, Domain: Domain,
				Metadata: map[string]string{"matched": strconv.Itoa(mismatch.Matched), "expected": strconv.Itoa(mismatch.Expected)}})
	case errors.Is(err, store.ErrTooManyDevices):
		return newStatus(codes.FailedPrecondition, ReasonTooManyDevices,
			fmt.Sprintf("selector %s matches more than %d devices: narrow it (one call acts on at most %d)", textcheck.Quote(selector), store.MaxBulkDevices, store.MaxBulkDevices))
	}
	return FromStore(err)
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
