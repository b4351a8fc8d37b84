package grpcerr

import "fmt"

// Page sizes of the listing RPCs (ListDevices, ListCommands,
// ListOperations, ListPolicyDecisions, ...): page_size 0 means
// DefaultPageSize, and at most MaxPageSize rows come back per page.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// PageSize turns a request's page_size into the number of rows to return:
// 0 → DefaultPageSize, 1–MaxPageSize as given. Errors: InvalidArgument on
// field page_size (ReasonOutOfRange) for a negative or larger value.
func PageSize(n int32) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n < 0 || n > MaxPageSize:
		return 0, InvalidArgument("page_size", ReasonOutOfRange, fmt.Sprintf("page_size %d is outside 1-%d (0 means %d)", n, MaxPageSize, DefaultPageSize))
	}
	return int(n), nil
}
