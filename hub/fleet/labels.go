package fleet

import (
	"maps"
	"time"

	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/labels"
)

// labelFilter checks a request's label selector (at field): keys and
// values as internal/labels says, at most labels.MaxPerDevice, and none
// with an as_of time (labels have no history). It returns a copy (nil for
// none). Errors: InvalidArgument naming field.
func labelFilter(field string, sel map[string]string, asOf time.Time) (map[string]string, error) {
	if len(sel) == 0 {
		return nil, nil
	}
	if !asOf.IsZero() {
		return nil, grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, field+" cannot be combined with as_of: labels have no history")
	}
	if err := labels.Check(field, sel); err != nil {
		return nil, grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, err.Error())
	}
	return maps.Clone(sel), nil
}
