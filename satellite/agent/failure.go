package agent

import (
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/site"
)

// setFailure puts the failed step's result r on a command result:
// PERMANENT for site.StateFailed, TRANSIENT otherwise (never UNSPECIFIED,
// which the hub reserves for satellites older than the field), and its
// reason.
func setFailure(res *ironlinkv1.CommandResult, r site.Result) {
	res.FailureClass = ironlinkv1.FailureClass_FAILURE_CLASS_TRANSIENT
	if r.Permanent() {
		res.FailureClass = ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT
	}
	res.FailureReason = r.Reason
}
