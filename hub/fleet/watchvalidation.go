package fleet

import (
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store/feed"
)

// validationEventToProto sets p to the validation run's feed event e
// (FLEET_EVENT_KIND_VALIDATION).
func validationEventToProto(p *ironlinkv1.FleetEvent, e *feed.ValidationEvent) {
	p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_VALIDATION
	p.Change = &ironlinkv1.FleetEvent_Validation{Validation: &ironlinkv1.ValidationEvent{RunId: e.RunID, DeviceId: e.DeviceID,
		DeviceName: e.DeviceName, Site: e.Site, Event: e.Event, Check: e.Check, Result: e.Result, Detail: e.Detail}}
}
