package grpcerr_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// TestFromStore is the table of FromStore: what a client sees for each
// error the store returns.
func TestFromStore(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantCode   codes.Code
		wantReason string
		wantMsg    string // substring
		wantField  string
	}{
		{"nil stays nil", nil, codes.OK, "", "", ""},
		{"not found", fmt.Errorf("device 0c1d5b6e-0000-4000-8000-000000000001: %w", store.ErrNotFound),
			codes.NotFound, grpcerr.ReasonNotFound, "device 0c1d5b6e-0000-4000-8000-000000000001: not found", ""},
		{"wrong site", fmt.Errorf("command x is for site %q: %w", "site-b", store.ErrWrongSite),
			codes.PermissionDenied, grpcerr.ReasonWrongSite, `for site "site-b"`, ""},
		{"mismatched ids", fmt.Errorf("command x is for device a, not b: %w", store.ErrMismatch),
			codes.InvalidArgument, grpcerr.ReasonMismatch, "not b", ""},
		{"fenced", fmt.Errorf("touch site %q epoch 3: %w", "site-a", store.ErrFenced),
			codes.Aborted, grpcerr.ReasonLinkSuperseded, "reconnect", ""},
		{"canceled", fmt.Errorf("list devices: %w", context.Canceled), codes.Canceled, "", "", ""},
		{"deadline", fmt.Errorf("list devices: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "", "", ""},
		{"NUL refused by PostgreSQL", fmt.Errorf("insert command: %w", &pgconn.PgError{Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0x00`}),
			codes.InvalidArgument, grpcerr.ReasonInvalidValue, "SQLSTATE 22021", ""},
		{"PostgreSQL data error echoes a prefix only", fmt.Errorf("q: %w", &pgconn.PgError{Code: "22P02", Message: "invalid input syntax for type uuid: " + strings.Repeat("x", 1<<20)}),
			codes.InvalidArgument, grpcerr.ReasonInvalidValue, "bytes)", ""},
		{"PostgreSQL down", fmt.Errorf("list devices: %w", errors.New("failed to connect to `host=127.0.0.1`: dial error")),
			codes.Unavailable, grpcerr.ReasonDatabaseUnavailable, "database unavailable; retry", ""},
		{"serialization failure after retries", fmt.Errorf("tx: %w", &pgconn.PgError{Code: "40001"}),
			codes.Unavailable, grpcerr.ReasonDatabaseUnavailable, "retry", ""},
		{"a status passes unchanged", status.Error(codes.ResourceExhausted, "too many"), codes.ResourceExhausted, "", "too many", ""},
		{"a text check names its field", &textcheck.Error{Field: "reason", Reason: textcheck.ReasonControlChar, Detail: "contains control character U+0000 (NUL) at byte 3"},
			codes.InvalidArgument, textcheck.ReasonControlChar, "reason contains control character", "reason"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := grpcerr.FromStore(tc.err)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("got %v for nil", got)
				}
				return
			}
			st, ok := status.FromError(got)
			if !ok {
				t.Fatalf("%v is not a status", got)
			}
			if st.Code() != tc.wantCode || grpcerr.Reason(got) != tc.wantReason || !strings.Contains(st.Message(), tc.wantMsg) {
				t.Fatalf("got %v / %q / reason %q, want %v / %q / %q", st.Code(), st.Message(), grpcerr.Reason(got), tc.wantCode, tc.wantMsg, tc.wantReason)
			}
			if len(st.Message()) > grpcerr.MaxMessageBytes+32 {
				t.Fatalf("message is %d bytes", len(st.Message()))
			}
			if f := grpcerr.Fields(got); tc.wantField != "" && !slices.Equal(f, []string{tc.wantField}) {
				t.Fatalf("fields %v, want [%s]", f, tc.wantField)
			}
			if tc.wantCode == codes.Unavailable && retryDelay(got) <= 0 {
				t.Fatal("Unavailable without RetryInfo")
			}
		})
	}
}

func retryDelay(err error) int64 {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration().Milliseconds()
		}
	}
	return 0
}

// TestConstructorsCarryDetails: the details grpcurl shows for each constructor.
func TestConstructorsCarryDetails(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantCode   codes.Code
		wantReason string
		wantFields []string
	}{
		{"invalid argument names the field", grpcerr.InvalidArgument("batch.devices[3].device_id", grpcerr.ReasonNotUUID, "batch.devices[3].device_id \"x\" is not a UUID"),
			codes.InvalidArgument, grpcerr.ReasonNotUUID, []string{"batch.devices[3].device_id"}},
		{"invalid argument without a field", grpcerr.InvalidArgument("", grpcerr.ReasonMalformedMessage, "cannot decode"),
			codes.InvalidArgument, grpcerr.ReasonMalformedMessage, nil},
		{"from a text check", grpcerr.FromCheck(textcheck.Text("reason", "a\x00b", 100)),
			codes.InvalidArgument, textcheck.ReasonControlChar, []string{"reason"}},
		{"not found", grpcerr.NotFound("site", "site-x", ""), codes.NotFound, grpcerr.ReasonNotFound, nil},
		{"permission denied", grpcerr.PermissionDenied(grpcerr.ReasonWrongSite, "device of site-b"), codes.PermissionDenied, grpcerr.ReasonWrongSite, nil},
		{"resource exhausted", grpcerr.ResourceExhausted("BATCH_TOO_LARGE", "1001 devices, limit 1000"), codes.ResourceExhausted, "BATCH_TOO_LARGE", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(tc.err)
			if st.Code() != tc.wantCode || grpcerr.Reason(tc.err) != tc.wantReason || !slices.Equal(grpcerr.Fields(tc.err), tc.wantFields) {
				t.Fatalf("got %v reason %q fields %v", st.Code(), grpcerr.Reason(tc.err), grpcerr.Fields(tc.err))
			}
			for _, d := range st.Details() {
				if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() != grpcerr.Domain {
					t.Fatalf("domain %q", ei.GetDomain())
				}
			}
		})
	}
}

// TestMessagesAreBoundedUTF8: a status message built from hostile input is
// short and valid UTF-8 (a status with details is marshalled as proto, which
// refuses invalid UTF-8).
func TestMessagesAreBoundedUTF8(t *testing.T) {
	hostile := strings.Repeat("\xff", 1<<20)
	for _, err := range []error{
		grpcerr.InvalidArgument(hostile, grpcerr.ReasonInvalidValue, hostile),
		grpcerr.NotFound("device", hostile, ""),
		grpcerr.FailedPrecondition(grpcerr.ReasonInvalidValue, hostile),
	} {
		st := status.Convert(err)
		if !utf8.ValidString(st.Message()) || len(st.Message()) > 4*grpcerr.MaxMessageBytes {
			t.Fatalf("message of %d bytes, valid UTF-8 %v", len(st.Message()), utf8.ValidString(st.Message()))
		}
		if len(st.Details()) == 0 {
			t.Fatalf("details lost: %v", st.Proto())
		}
	}
}
