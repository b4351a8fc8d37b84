package link

import (
	"fmt"
	"slices"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// FeatureHealth is the Welcome feature of a hub that takes HealthReports
// on the link.
const FeatureHealth = "health"

// HealthSpool holds the local health door's reports for the link
// (satellite/healthdoor.Spool): the client sends them only to a hub whose
// Welcome lists FeatureHealth, hands back the hub's answers, and puts the
// unanswered ones back when the link ends.
type HealthSpool interface {
	// Wake is signalled when reports wait to be sent.
	Wake() <-chan struct{}
	// Take returns the reports to send now and marks them sent.
	Take() []*ironlinkv1.HealthReport
	// Result hands over the hub's answer to a report.
	Result(*ironlinkv1.HealthResult)
	// LinkDown puts the sent, unanswered reports back to be sent again.
	LinkDown()
}

// healthOn reports whether this link carries health reports: the
// satellite has a door and the hub's Welcome lists FeatureHealth.
func (c *Client) healthOn(w *ironlinkv1.Welcome) bool {
	return c.cfg.Health != nil && slices.Contains(w.GetFeatures(), FeatureHealth)
}

// sendHealth sends every waiting health report.
func (c *Client) sendHealth(stream ironlinkv1.LinkService_ConnectClient) error {
	for _, r := range c.cfg.Health.Take() {
		if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_HealthReport{HealthReport: r}}); err != nil {
			return fmt.Errorf("send health report %d: %w", r.GetReportId(), err)
		}
		c.log.Debug("health report sent", "report_id", r.GetReportId(), "events", len(r.GetEvents()))
	}
	return nil
}
