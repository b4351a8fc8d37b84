package fleet

import (
	"context"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/wire"
)

// SetHardwareProfiles gives the server the hardware profiles in force
// (--hardware-profiles-file), for GetDevice's hardware_profile. Call it
// before serving; without it hardware_profile is never set.
func (s *Server) SetHardwareProfiles(profiles func() *hwprofile.File) { s.profiles = profiles }

// addHardware sets resp.hardware (the stored hardware) and
// resp.hardware_profile (the profile that applies, its differences and
// the stored HardwareMatchesProfile condition, or the verdict of now
// before the hub's check stored it).
func (s *Server) addHardware(ctx context.Context, d store.Device, resp *ironlinkv1.GetDeviceResponse) error {
	doc, err := s.store.DeviceHardwareJSON(ctx, d.ID)
	if err != nil {
		return s.storeErr(err, "device", d.ID)
	}
	if doc == nil {
		return nil
	}
	h, err := hwprofile.Decode(doc)
	if err != nil {
		s.log.Warn("stored hardware undecodable", logkey.DeviceID, d.ID, "err", err)
		return nil
	}
	resp.Hardware = h
	if s.profiles == nil {
		return nil
	}
	r := hwprofile.Evaluate(s.profiles(), store.DeviceHardware{DeviceID: d.ID, Site: d.Site, Name: d.Name,
		ResourceClass: d.Facts.ResourceClass, JSON: doc}, time.Now().UTC(), s.log)
	if r.Profile == "" {
		return nil
	}
	c := r.Condition
	for _, stored := range d.Conditions {
		if stored.Type == condition.HardwareMatchesProfile && stored.SameObservation(c) {
			c = stored
		}
	}
	resp.HardwareProfile = &ironlinkv1.HardwareProfileMatch{Profile: r.Profile, Condition: wire.ConditionToProto(c),
		Differences: r.Differences, Fault: r.Fault}
	return nil
}
