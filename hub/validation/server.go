package validation

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"time"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Limits of a result.
const (
	// MaxExcerptBytes: a longer output excerpt keeps its last 4 KiB.
	MaxExcerptBytes = 4 << 10
	// MaxURLBytes bounds the artifacts link.
	MaxURLBytes = 2048
	// MaxDuration bounds a check's duration.
	MaxDuration = 7 * 24 * time.Hour
)

// checkNameRe is a check's name (as hub/operations' CheckNameRe).
var checkNameRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Store is the part of hub/store ValidationService uses.
type Store interface {
	// RecordValidationResult: see store.Store.RecordValidationResult.
	RecordValidationResult(ctx context.Context, runID, site string, v store.ValidationResult) (store.ValidationRun, error)
}

// Server implements ironlinkv1.ValidationServiceServer.
type Server struct {
	ironlinkv1.UnimplementedValidationServiceServer
	st    Store
	actor func(context.Context) string
	log   *slog.Logger
	// wake asks the runner to look at the runs now (nil: none).
	wake func()
}

// NewServer returns ValidationService over st; actor names the caller
// (the reporter recorded); wake (may be nil) nudges the Runner.
func NewServer(st Store, actor func(context.Context) string, wake func(), log *slog.Logger) *Server {
	return &Server{st: st, actor: actor, wake: wake, log: log}
}

// RecordValidationResult validates the result, records it against the
// run when the caller's site is the run's and answers the run. See the
// proto for the errors.
func (s *Server) RecordValidationResult(ctx context.Context, req *ironlinkv1.RecordValidationResultRequest) (*ironlinkv1.RecordValidationResultResponse, error) {
	v, err := checkResult(req)
	if err != nil {
		return nil, err
	}
	v.Reporter = s.actor(ctx)
	sc := authn.CallerScope(ctx)
	site := ""
	if sc.Bound() && len(sc.Sites) == 1 {
		site = sc.Sites[0]
	}
	run, err := s.st.RecordValidationResult(ctx, req.GetRunId(), site, v)
	if err != nil {
		if grpcerr.Reason(grpcerr.FromStore(err)) == grpcerr.ReasonWrongSite {
			return nil, grpcerr.PermissionDenied(grpcerr.ReasonWrongSite, "validation run "+req.GetRunId()+" is of another site than the caller's")
		}
		return nil, grpcerr.FromStoreNamed(err, "validation run", req.GetRunId())
	}
	s.log.Info("validation result recorded", "run_id", run.ID, "device_id", run.DeviceID, "check", v.Check, "pass", v.Pass, "reporter", v.Reporter)
	if s.wake != nil {
		s.wake()
	}
	return &ironlinkv1.RecordValidationResultResponse{Run: fleet.RunToProto(run)}, nil
}

// checkResult validates req into a store result (no database).
func checkResult(req *ironlinkv1.RecordValidationResultRequest) (store.ValidationResult, error) {
	var v store.ValidationResult
	id, err := uuid.Parse(req.GetRunId())
	if err != nil {
		return v, grpcerr.InvalidArgument("run_id", grpcerr.ReasonNotUUID, "run_id "+textcheck.Quote(req.GetRunId())+" is not a run id (UUID)")
	}
	req.RunId = id.String()
	if !checkNameRe.MatchString(req.GetCheck()) || req.GetCheck() == store.HubCheck || req.GetCheck() == OperationCheck {
		return v, grpcerr.InvalidArgument("check", grpcerr.ReasonInvalidValue, "check "+textcheck.Quote(req.GetCheck())+
			" is not a check name (1-64 bytes of letters, digits, '.', '_', '-'; hardware-profile and operation are the hub's own)")
	}
	switch req.GetResult() {
	case ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS:
		v.Pass = true
	case ironlinkv1.ValidationResult_VALIDATION_RESULT_FAIL:
	default:
		return v, grpcerr.InvalidArgument("result", grpcerr.ReasonRequired, "result is required: PASS or FAIL")
	}
	if d := req.GetDuration(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 || d.AsDuration() > MaxDuration {
			return v, grpcerr.InvalidArgument("duration", grpcerr.ReasonOutOfRange, fmt.Sprintf("duration must be between 0 and %s", MaxDuration))
		}
		v.Duration = d.AsDuration()
	}
	out := req.GetOutputExcerpt()
	if len(out) > MaxExcerptBytes {
		out = tail(out, MaxExcerptBytes)
	}
	if err := textcheck.Text("output_excerpt", out, MaxExcerptBytes); err != nil {
		return v, grpcerr.FromCheck(err)
	}
	v.Check, v.OutputExcerpt = req.GetCheck(), out
	if u := req.GetArtifactsUrl(); u != "" {
		if err := textcheck.Line("artifacts_url", u, MaxURLBytes); err != nil {
			return v, grpcerr.FromCheck(err)
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return v, grpcerr.InvalidArgument("artifacts_url", grpcerr.ReasonInvalidValue, "artifacts_url "+textcheck.Quote(u)+" is not an http(s) URL")
		}
		v.ArtifactsURL = u
	}
	return v, nil
}

// tail returns the last n bytes of s, starting at a UTF-8 boundary.
func tail(s string, n int) string {
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}
