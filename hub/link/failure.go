package link

import (
	"fmt"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/wire"
)

// failureClassFromProto maps a CommandResult's failure class to the stored
// one. UNSPECIFIED (a satellite older than the field) and any value this hub
// does not know are store.FailureUnclassified, which delivery treats as
// transient: a failure is never made permanent by guesswork.
func failureClassFromProto(c ironlinkv1.FailureClass) store.FailureClass {
	f, _ := wire.EnumToName[store.FailureClass](c, ironlinkv1.FailureClass_name, "FAILURE_CLASS_")
	return f
}

// checkFailure refuses a CommandResult whose failure_reason is neither
// empty nor one CamelCase word (condition.ValidReason), with
// InvalidArgument naming the field.
func checkFailure(r *ironlinkv1.CommandResult) error {
	if fr := r.GetFailureReason(); fr != "" && !condition.ValidReason(fr) {
		return grpcerr.InvalidArgument("command_result.failure_reason", grpcerr.ReasonInvalidValue,
			fmt.Sprintf("command result: failure_reason is not one CamelCase word of at most %d bytes", condition.MaxReasonBytes))
	}
	return nil
}
