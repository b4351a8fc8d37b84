package fleet

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
)

// RetryCommand implements FleetService.RetryCommand: an operator's retry of
// a FAILED command (the way out of a PERMANENT failure once its cause is
// fixed; a TRANSIENT one is sent at once instead of after its backoff). It
// re-issues the command's desired state as the next generation, recorded in
// the quarantine history with the caller as actor and "retry of command
// <id>[: <reason>]" as reason.
//
// Errors: InvalidArgument (malformed id, reason over MaxReasonBytes or not
// UTF-8), NotFound, PermissionDenied (a site the caller may not use),
// FailedPrecondition (the command is not FAILED). Nothing is written on
// error.
func (s *Server) RetryCommand(ctx context.Context, req *ironlinkv1.RetryCommandRequest) (*ironlinkv1.RetryCommandResponse, error) {
	id, err := parseID("command_id", req.GetCommandId())
	if err != nil {
		return nil, err
	}
	reason := strings.TrimSpace(req.GetReason())
	switch {
	case len(reason) > MaxReasonBytes:
		return nil, status.Errorf(codes.InvalidArgument, "reason is %d bytes, limit %d", len(reason), MaxReasonBytes)
	case !utf8.ValidString(reason):
		return nil, status.Error(codes.InvalidArgument, "reason is not valid UTF-8")
	}
	sc := callerScope(ctx)
	if sc.bound() {
		c, err := s.store.GetCommand(ctx, id)
		if err != nil {
			return nil, s.storeErr(err)
		}
		if !sc.allows(c.Site) {
			return nil, s.deny(ctx, sc, "command "+id, c.Site)
		}
	}
	full := "retry of command " + id
	if reason != "" {
		full += ": " + reason
	}
	actor := s.actor(ctx)
	cmd, err := s.store.RetryCommand(ctx, id, actor, full, SourceOperatorAPI)
	if errors.Is(err, store.ErrNotRetryable) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		return nil, s.storeErr(err)
	}
	s.log.Info("command retried", "retried_command_id", id, "command_id", cmd.ID, "device_id", cmd.DeviceID,
		"desired", cmd.Desired, "generation", cmd.Generation, "actor", actor, "reason", full)
	return &ironlinkv1.RetryCommandResponse{Command: commandToProto(cmd)}, nil
}
