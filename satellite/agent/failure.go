package agent

import (
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/gate"
)

// setFailure puts f on a failed result: PERMANENT or TRANSIENT (never
// UNSPECIFIED, which the hub reserves for satellites older than the field)
// and its reason.
func setFailure(res *ironlinkv1.CommandResult, f gate.Failure) {
	res.FailureClass = ironlinkv1.FailureClass_FAILURE_CLASS_TRANSIENT
	if f.Permanent {
		res.FailureClass = ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT
	}
	res.FailureReason = f.Reason
}
