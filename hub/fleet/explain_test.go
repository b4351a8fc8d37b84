package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// report sends one batch for site "demo" setting the given conditions
// (Enrolled=True is added) and facts on device id.
func (h *testHub) report(t *testing.T, id string, facts *store.Facts, cs ...condition.Condition) {
	t.Helper()
	ctx := context.Background()
	sess, err := h.Store.OpenLink(ctx, store.LinkHello{Site: "demo", Replica: "r"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	cs = append(cs, condition.Condition{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled"})
	for i := range cs {
		cs[i].ObservedTime, cs[i].LastTransitionTime = now, now
	}
	if _, err := h.Store.ApplyBatch(ctx, "demo", sess.Epoch, store.Batch{Sequence: sess.LastSequence + 1,
		Devices: []store.DeviceUpdate{{DeviceID: id, ObservedTime: now, Facts: facts, Conditions: cs}}}); err != nil {
		t.Fatal(err)
	}
}

func (h *testHub) explain(t *testing.T, id string) (*ironlinkv1.Device, *ironlinkv1.StatusExplanation) {
	t.Helper()
	resp, err := h.Fleet.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetExplanation() == nil {
		t.Fatal("GetDevice without an explanation")
	}
	return resp.GetDevice(), resp.GetExplanation()
}

// listed returns the ListDevices entry of id.
func (h *testHub) listed(t *testing.T, id string) *ironlinkv1.Device {
	t.Helper()
	resp, err := h.Fleet.ListDevices(context.Background(), &ironlinkv1.ListDevicesRequest{Site: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.GetDevices() {
		if d.GetDeviceId() == id {
			return d
		}
	}
	t.Fatalf("device %s not listed", id)
	return nil
}

// TestExplanationOfEachStatus: GetDevice says why a device is FAULTED (the
// Ironic last_error), in MAINTENANCE (the maintenance reason and fault),
// QUARANTINED (who, why, from where, the command) and UNREACHABLE (the
// site's silence, the last known status and its condition), and
// ListDevices carries the same short form in status_message.
func TestExplanationOfEachStatus(t *testing.T) {
	h := newTestHub(t)
	ctx := context.Background()
	faulted, maint, quar := h.Devices[1], h.Devices[2], h.Devices[0]

	const lastError = "Timeout reached while waiting for callback for node"
	h.report(t, faulted, &store.Facts{Name: "node-1", ProvisionState: "deploy failed"},
		condition.Condition{Type: condition.ProvisioningHealthy, Status: condition.False, Reason: "DeployFailed", Message: lastError})
	d, e := h.explain(t, faulted)
	if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED || e.GetRule() != 4 ||
		!strings.HasPrefix(e.GetRuleDescription(), "4. FAULTED: ProvisioningHealthy is False") {
		t.Fatalf("faulted: status %v rule %d %q", d.GetStatus(), e.GetRule(), e.GetRuleDescription())
	}
	if d.GetStatusMessage() != lastError || e.GetMessage() != lastError || e.GetReason() != "ProvisioningHealthy=False: DeployFailed" {
		t.Fatalf("faulted: message %q / %q, reason %q", d.GetStatusMessage(), e.GetMessage(), e.GetReason())
	}
	if len(e.GetConditions()) != 1 || e.GetConditions()[0].GetType() != string(condition.ProvisioningHealthy) ||
		e.GetConditions()[0].GetMessage() != lastError || e.GetConditions()[0].GetLastTransitionTime() == nil {
		t.Fatalf("faulted: conditions behind %v", e.GetConditions())
	}
	if e.GetSince() == nil || e.GetQuarantine() != nil || e.GetSiteSilence() != nil {
		t.Fatalf("faulted: since %v quarantine %v silence %v", e.GetSince(), e.GetQuarantine(), e.GetSiteSilence())
	}
	if got := h.listed(t, faulted).GetStatusMessage(); got != lastError {
		t.Fatalf("ListDevices status_message %q, want the last_error", got)
	}

	h.report(t, maint, &store.Facts{Name: "node-2", Maintenance: true, Fault: "power failure"},
		condition.Condition{Type: condition.MaintenanceClear, Status: condition.False, Reason: "PowerFailure", Message: "BMC did not answer"})
	d, e = h.explain(t, maint)
	if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_MAINTENANCE || e.GetRule() != 5 ||
		e.GetConditions()[0].GetType() != string(condition.MaintenanceClear) {
		t.Fatalf("maintenance: %v rule %d conditions %v", d.GetStatus(), e.GetRule(), e.GetConditions())
	}
	if want := "BMC did not answer (Ironic fault: power failure)"; d.GetStatusMessage() != want || h.listed(t, maint).GetStatusMessage() != want {
		t.Fatalf("maintenance: message %q, want %q", d.GetStatusMessage(), want)
	}

	d, e = h.explain(t, quar)
	q := e.GetQuarantine()
	if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED || e.GetRule() != 6 || len(e.GetConditions()) != 0 {
		t.Fatalf("quarantined: %v rule %d conditions %v", d.GetStatus(), e.GetRule(), e.GetConditions())
	}
	if q.GetActor() != "ops" || q.GetReason() != "GPU 3 throws Xid 79" || q.GetSource() != "operator-api" || q.GetCommandId() != h.Command ||
		q.GetCommandState() != ironlinkv1.CommandState_COMMAND_STATE_PENDING || q.GetApplied() || q.GetGeneration() != 1 || q.GetChangeTime() == nil {
		t.Fatalf("quarantined: quarantine %v", q)
	}
	if msg := d.GetStatusMessage(); !strings.HasPrefix(msg, "quarantined by ops (operator-api) at ") || !strings.HasSuffix(msg, ": GPU 3 throws Xid 79") {
		t.Fatalf("quarantined: message %q", msg)
	}
	// A quarantine of a FAULTED device is shown although FAULTED ranks higher.
	if _, err := h.Fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: faulted, Reason: "keep it away"}); err != nil {
		t.Fatal(err)
	}
	if d, e = h.explain(t, faulted); d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED ||
		e.GetQuarantine().GetReason() != "keep it away" || d.GetStatusMessage() != lastError {
		t.Fatalf("faulted and quarantined: %v %v %q", d.GetStatus(), e.GetQuarantine(), d.GetStatusMessage())
	}

	if _, err := h.Store.MarkStaleSites(ctx, 0); err != nil {
		t.Fatal(err)
	}
	d, e = h.explain(t, faulted)
	if d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_UNREACHABLE || e.GetRule() != 2 ||
		e.GetLastKnownStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED ||
		e.GetSiteSilence().GetSite() != "demo" || e.GetSiteSilence().GetLastSeenTime() == nil {
		t.Fatalf("unreachable: %v rule %d last known %v silence %v", d.GetStatus(), e.GetRule(), e.GetLastKnownStatus(), e.GetSiteSilence())
	}
	if len(e.GetConditions()) != 1 || e.GetConditions()[0].GetType() != string(condition.ProvisioningHealthy) {
		t.Fatalf("unreachable: the condition behind the last known status: %v", e.GetConditions())
	}
	if msg := d.GetStatusMessage(); !strings.HasPrefix(msg, "site demo silent since ") || !strings.HasSuffix(msg, "; last known FAULTED: "+lastError) {
		t.Fatalf("unreachable: message %q", msg)
	}
	if got := h.listed(t, faulted).GetStatusMessage(); got != d.GetStatusMessage() {
		t.Fatalf("ListDevices status_message %q, GetDevice %q", got, d.GetStatusMessage())
	}
}
