package fleet

import (
	"context"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// RetryCommand implements FleetService.RetryCommand: an operator's retry of
// a FAILED command (the way out of a PERMANENT failure once its cause is
// fixed; a TRANSIENT one is sent at once instead of after its backoff). It
// re-issues the command's desired state as the next generation, recorded in
// the quarantine history with the caller as actor and "retry of command
// <id>[: <reason>]" as reason.
//
// Errors (hub/grpcerr, with ErrorInfo reasons): InvalidArgument (malformed
// id; a reason over MaxReasonBytes, not UTF-8 or with control characters),
// NotFound, PermissionDenied WRONG_SITE (a site the caller may not use),
// FailedPrecondition COMMAND_NOT_FAILED (the command is not FAILED).
// Nothing is written on error.
func (s *Server) RetryCommand(ctx context.Context, req *ironlinkv1.RetryCommandRequest) (*ironlinkv1.RetryCommandResponse, error) {
	id, err := parseID("command_id", req.GetCommandId())
	if err != nil {
		return nil, err
	}
	reason := strings.TrimSpace(req.GetReason())
	if err := textcheck.Text("reason", reason, MaxReasonBytes); err != nil {
		return nil, grpcerr.FromCheck(err)
	}
	sc := callerScope(ctx)
	if sc.Bound() {
		c, err := s.store.GetCommand(ctx, id)
		if err != nil {
			return nil, s.storeErr(err, "command", id)
		}
		if !sc.Allows(c.Site) {
			return nil, s.deny(ctx, sc, "command "+id, c.Site)
		}
	}
	full := "retry of command " + id
	if reason != "" {
		full += ": " + reason
	}
	actor := s.actor(ctx)
	cmd, err := s.store.RetryCommand(ctx, id, actor, full, SourceOperatorAPI)
	if err != nil {
		return nil, s.storeErr(err, "command", id) // ErrNotRetryable: FailedPrecondition
	}
	s.log.Info("command retried", "retried_command_id", id, "command_id", cmd.ID, "device_id", cmd.DeviceID,
		"desired", cmd.Desired, "generation", cmd.Generation, "actor", actor, "reason", full)
	return &ironlinkv1.RetryCommandResponse{Command: commandToProto(cmd)}, nil
}
