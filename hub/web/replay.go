package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The policy replay page (docs/reference/web.md "Policy replay"):
// PolicyService.ReplayPolicy over a period, with the policy in force or a
// candidate file pasted into the form, as `ironlink policy replay` shows
// it. A replay reads and writes nothing, so a read-only operator may run
// it; a candidate comes in a POST (its size), which the cross-origin
// protection covers like every other.

// maxReplayFormBytes bounds a replay form (the candidate policy file).
const maxReplayFormBytes = 256 << 10

// Replayer is what the replay page needs of the hub's PolicyService
// (hub/policyapi.Server implements it with Policy).
type Replayer interface {
	// ReplayPolicy decides a policy over a stored period.
	ReplayPolicy(ctx context.Context, req *ironlinkv1.ReplayPolicyRequest) (*ironlinkv1.ReplayPolicyResponse, error)
}

type replayData struct {
	From, To, Site, PolicyYAML string
	// Resp is the replay's answer; nil before the form was sent.
	Resp *ironlinkv1.ReplayPolicyResponse
}

// replayPage handles GET and POST /policy/replay: from (required: an RFC
// 3339 time, 2026-12-01T00:00, or a duration ago such as 168h), to
// (default now), site, and in a POST policy_yaml (a candidate; empty: the
// policy in force). Without from it shows the form.
func (s *Server) replayPage(w http.ResponseWriter, r *http.Request, id Identity) {
	if !s.needPolicy(w, r) {
		return
	}
	rp, ok := s.policy.(Replayer)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "this hub's policy API does not replay")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxReplayFormBytes)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	d := replayData{From: r.Form.Get("from"), To: r.Form.Get("to"), Site: r.Form.Get("site"), PolicyYAML: r.PostForm.Get("policy_yaml")}
	if d.From == "" {
		s.render(w, r, http.StatusOK, "replay", "Policy replay", d)
		return
	}
	now := s.now()
	from, err := parseAgo("from", d.From, now)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	to := now
	if strings.TrimSpace(d.To) != "" {
		if to, err = parseAgo("to", d.To, now); err != nil {
			s.apiFail(w, r, err)
			return
		}
	}
	d.Resp, err = rp.ReplayPolicy(apiContext(r.Context(), id), &ironlinkv1.ReplayPolicyRequest{FromTime: timestamppb.New(from),
		ToTime: timestamppb.New(to), Site: d.Site, PolicyYaml: d.PolicyYAML})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "replay", "Policy replay", d)
}

// parseAgo reads a time: RFC 3339, 2006-01-02T15:04 (UTC), or a duration
// ago ("168h").
func parseAgo(field, v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badInput(field, fmt.Errorf("%s %q is neither a time (2026-12-01T00:00, UTC) nor a duration ago (168h)", field, v))
}
