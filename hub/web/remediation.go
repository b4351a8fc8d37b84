package web

import (
	"context"
	"fmt"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Remediation is what the device page needs of the hub's
// RemediationService (hub/remediation.API): the RPC's own handler (device
// resolution, site binding, errors as gRPC statuses).
type Remediation interface {
	// GetDeviceRemediation explains a device's remediation: its rule's
	// ladder, the ladder run and why it waits, the next step, and its
	// repair handoffs with their webhook delivery attempts.
	GetDeviceRemediation(ctx context.Context, req *ironlinkv1.GetDeviceRemediationRequest) (*ironlinkv1.GetDeviceRemediationResponse, error)
	// ListHandoffs lists repair handoffs, newest first (the /handoffs page).
	ListHandoffs(ctx context.Context, req *ironlinkv1.ListHandoffsRequest) (*ironlinkv1.ListHandoffsResponse, error)
	// CloseHandoff closes an open repair handoff with a note.
	CloseHandoff(ctx context.Context, req *ironlinkv1.CloseHandoffRequest) (*ironlinkv1.CloseHandoffResponse, error)
}

// SetRemediation gives the view the remediation API (the device page's
// Remediation section: what `ironlink explain` shows; the /handoffs page);
// call it before serving. Without it the device page has no Remediation
// section and /handoffs answers 404.
func (s *Server) SetRemediation(r Remediation) { s.rem = r }

// waitWords says in words why a ladder's next step waits, for each wait
// reason of hub/remediation (the ladder's detail adds the specifics: the
// label value and limit, the refusal).
var waitWords = map[string]string{
	"MaxInFlight":            "the site's remediations in flight are at their limit (remediation.maxInFlight)",
	"MaxInFlightPerLabel":    "the failure domain's remediations in flight are at their limit (remediation.perLabel)",
	"ExcludedFromAutomation": "the device is excluded from automation",
	"MaintenanceWindow":      "a maintenance window is in force",
	"GuardTripped":           "the site's quarantine guard is tripped",
	"SiteUnreachable":        "the site is unreachable",
	"CustomerInstance":       "the device has a customer instance",
	"OperationActive":        "another operation of the device is active",
	"PolicyDisabled":         "the site's policy is disabled (enabled: false): the ladder is paused where it is",
	"Precondition":           "the operations' checks refuse the step's operation (tried again every pass until the step's timeout)",
}

// attemptText is a webhook delivery attempt's outcome, as `ironlink
// explain` says it: "204 in 3ms", "500 Internal Server Error in 12ms", "no
// answer in 10s: context deadline exceeded".
func attemptText(at *ironlinkv1.HandoffWebhookAttempt) string {
	d := at.GetDuration().AsDuration()
	switch {
	case at.GetStatusCode() == 0:
		return fmt.Sprintf("no answer in %s: %s", d, at.GetError())
	case at.GetError() != "":
		return fmt.Sprintf("%s in %s", at.GetError(), d)
	}
	return fmt.Sprintf("%d in %s", at.GetStatusCode(), d)
}

// ladderSteps is a rule's ladder in one line: "1. REBOOT (timeout 15m0s),
// 2. REPROVISION (timeout 1h0m0s)"; a step that continues says so
// ("1. NOVA_DELETE (timeout 30m0s, continues)").
func ladderSteps(steps []*ironlinkv1.LadderStepSpec) string {
	out := make([]string, len(steps))
	for i, s := range steps {
		cont := ""
		if s.GetContinues() {
			cont = ", continues"
		}
		out[i] = fmt.Sprintf("%d. %s (timeout %s%s)", i+1, s.GetKind(), s.GetTimeout().AsDuration(), cont)
	}
	return strings.Join(out, ", ")
}

func init() {
	funcs["waitWords"] = func(reason string) string {
		if w, ok := waitWords[reason]; ok {
			return w
		}
		return reason
	}
	funcs["attemptText"] = attemptText
	funcs["ladderSteps"] = ladderSteps
	funcs["attemptOK"] = func(at *ironlinkv1.HandoffWebhookAttempt) bool {
		return at.GetStatusCode() >= 200 && at.GetStatusCode() < 300
	}
}
