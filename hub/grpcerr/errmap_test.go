package grpcerr_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
)

// TestStoreErrorsMapToTheirStatus: each domain error of hub/store, wrapped
// as the store returns it, becomes the code and reason of FromStore's table,
// and a database failure becomes a retryable Unavailable.
func TestStoreErrorsMapToTheirStatus(t *testing.T) {
	wrap := func(e error) error { return fmt.Errorf("operation 1: %w", e) }
	tests := []struct {
		err        error
		wantCode   codes.Code
		wantReason string
		wantSuffix string
	}{
		{wrap(store.ErrNotFound), codes.NotFound, grpcerr.ReasonNotFound, ""},
		{wrap(store.ErrWrongSite), codes.PermissionDenied, grpcerr.ReasonWrongSite, ""},
		{wrap(store.ErrMismatch), codes.InvalidArgument, grpcerr.ReasonMismatch, ""},
		{wrap(store.ErrFenced), codes.Aborted, grpcerr.ReasonLinkSuperseded, "reconnect"},
		{wrap(store.ErrNotRetryable), codes.FailedPrecondition, grpcerr.ReasonNotRetryable, ""},
		{wrap(store.ErrHeldByOthers), codes.FailedPrecondition, grpcerr.ReasonHeldByOthers, ""},
		{wrap(store.ErrQuarantined), codes.FailedPrecondition, grpcerr.ReasonQuarantined, ""},
		{wrap(store.ErrOperationActive), codes.FailedPrecondition, grpcerr.ReasonOperationActive, ": wait for it to finish or cancel it"},
		{wrap(store.ErrOperationFinished), codes.FailedPrecondition, grpcerr.ReasonOperationFinished, ""},
		{wrap(store.ErrNotCancellable), codes.FailedPrecondition, grpcerr.ReasonNotAbortable, ""},
		{wrap(store.ErrNotPending), codes.FailedPrecondition, grpcerr.ReasonNotPending, ""},
		{wrap(store.ErrHistoryExpired), codes.InvalidArgument, grpcerr.ReasonOutOfRange, " (hub flag --history-retention)"},
		{store.ErrAsOfUnsupported, codes.InvalidArgument, grpcerr.ReasonInvalidValue, "facts have no history"},
		{wrap(context.DeadlineExceeded), codes.DeadlineExceeded, "", ""},
		{errors.New("connection reset"), codes.Unavailable, grpcerr.ReasonDatabaseUnavailable, "retry"},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			got := grpcerr.FromStore(tc.err)
			st := status.Convert(got)
			if st.Code() != tc.wantCode || grpcerr.Reason(got) != tc.wantReason || !strings.HasSuffix(st.Message(), tc.wantSuffix) {
				t.Fatalf("got %v %q %q, want %v %q ...%q", st.Code(), grpcerr.Reason(got), st.Message(), tc.wantCode, tc.wantReason, tc.wantSuffix)
			}
		})
	}
	if grpcerr.FromStore(nil) != nil {
		t.Fatal("FromStore(nil) is not nil")
	}
}

// TestNamedNotFoundCarriesTheResource: FromStoreNamed names the resource of a
// NotFound in a ResourceInfo; without a resource type it is FromStore's.
func TestNamedNotFoundCarriesTheResource(t *testing.T) {
	err := fmt.Errorf("operation 7: %w", store.ErrNotFound)
	st := status.Convert(grpcerr.FromStoreNamed(err, "operation", "7"))
	var ri *errdetails.ResourceInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.ResourceInfo); ok {
			ri = r
		}
	}
	if st.Code() != codes.NotFound || ri.GetResourceType() != "operation" || ri.GetResourceName() != "7" || st.Message() != err.Error() {
		t.Fatalf("got %v %q %v", st.Code(), st.Message(), ri)
	}
	if plain := status.Convert(grpcerr.FromStoreNamed(err, "", "")); len(plain.Details()) != 1 {
		t.Fatalf("without a resource type: %d details, want the ErrorInfo only", len(plain.Details()))
	}
}

// TestBulkRefusalsNameTheCounts: a count mismatch carries both counts in
// its ErrorInfo metadata; too many devices names the limit.
func TestBulkRefusalsNameTheCounts(t *testing.T) {
	err := grpcerr.FromBulk(fmt.Errorf("bulk: %w", &store.CountMismatchError{Expected: 3, Matched: 5}), "site=a")
	st := status.Convert(err)
	var md map[string]string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			md = ei.GetMetadata()
		}
	}
	if st.Code() != codes.FailedPrecondition || grpcerr.Reason(err) != grpcerr.ReasonCountMismatch || md["matched"] != "5" || md["expected"] != "3" {
		t.Fatalf("count mismatch: %v %q %v", st.Code(), grpcerr.Reason(err), md)
	}
	err = grpcerr.FromBulk(store.ErrTooManyDevices, "site=a")
	if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != grpcerr.ReasonTooManyDevices ||
		!strings.Contains(status.Convert(err).Message(), fmt.Sprint(store.MaxBulkDevices)) {
		t.Fatalf("too many devices: %v", err)
	}
}

// TestRateLimitedSaysWhenToRetry: the RetryInfo delay is the limiter's,
// and at least 1 ms.
func TestRateLimitedSaysWhenToRetry(t *testing.T) {
	for _, tc := range []struct{ after, want time.Duration }{{250 * time.Millisecond, 250 * time.Millisecond}, {0, time.Millisecond}} {
		st := status.Convert(grpcerr.RateLimited("slow down", tc.after))
		var got time.Duration
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				got = ri.GetRetryDelay().AsDuration()
			}
		}
		if st.Code() != codes.ResourceExhausted || got != tc.want {
			t.Fatalf("retry after %v: %v, RetryInfo %v, want %v", tc.after, st.Code(), got, tc.want)
		}
	}
}
