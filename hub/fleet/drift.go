package fleet

import (
	"context"
	"maps"
	"slices"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/devsel"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// maxOutlierNames bounds the device names one outlier group lists.
const maxOutlierNames = 100

// Hardware returns HardwareService (drift, hardware history, validation
// runs) over the same store and site binding as s.
func (s *Server) Hardware() ironlinkv1.HardwareServiceServer { return hardwareServer{s: s} }

// hardwareServer implements ironlinkv1.HardwareServiceServer.
type hardwareServer struct {
	ironlinkv1.UnimplementedHardwareServiceServer
	s *Server
}

// GetFleetDrift implements HardwareService.GetFleetDrift.
func (h hardwareServer) GetFleetDrift(ctx context.Context, req *ironlinkv1.GetFleetDriftRequest) (*ironlinkv1.GetFleetDriftResponse, error) {
	s := h.s
	_, sc, err := s.listScope(ctx, 0, req.GetSite())
	if err != nil {
		return nil, err
	}
	rc := req.GetResourceClass()
	if err := textcheck.Line("resource_class", rc, 255); err != nil {
		return nil, grpcerr.FromCheck(err)
	}
	devs, err := s.store.HardwareOfDevices(ctx, req.GetSite(), sc.Sites, rc)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	if len(devs) == 0 {
		// An unknown site is NotFound, not an empty (healthy-looking) answer.
		if err := s.checkExists(ctx, req.GetSite(), ""); err != nil {
			return nil, err
		}
	}
	resp := &ironlinkv1.GetFleetDriftResponse{}
	for start := 0; start < len(devs); {
		end := start
		for end < len(devs) && devs[end].Site == devs[start].Site && devs[end].ResourceClass == devs[start].ResourceClass {
			end++
		}
		resp.Groups = append(resp.Groups, s.driftGroup(devs[start:end]))
		start = end
	}
	return resp, nil
}

// driftFacts decodes each device's stored hardware to its facts.
func (s *Server) driftFacts(devs []store.DeviceHardware) []hwprofile.DriftDevice {
	out := make([]hwprofile.DriftDevice, len(devs))
	for i, d := range devs {
		out[i] = hwprofile.DriftDevice{ID: d.DeviceID, Name: d.Name}
		h, err := hwprofile.Decode(d.JSON)
		if err != nil {
			s.log.Warn("stored hardware undecodable", logkey.DeviceID, d.DeviceID, "err", err)
			continue
		}
		out[i].Facts, out[i].Stale = hwprofile.Facts(h), h.GetStale()
	}
	return out
}

// driftGroup compares one (site, resource class) group's devices.
func (s *Server) driftGroup(devs []store.DeviceHardware) *ironlinkv1.DriftGroup {
	site, rc := devs[0].Site, devs[0].ResourceClass
	d := hwprofile.CompareGroup(s.driftFacts(devs))
	g := &ironlinkv1.DriftGroup{Site: site, ResourceClass: rc, Devices: int32(d.Devices), Matching: int32(d.Matching),
		WithoutInventory: int32(d.WithoutInventory), Stale: int32(d.Stale), Expected: d.Expected, Summary: d.Summary(rc)}
	for _, o := range d.Outliers {
		sel := &ironlinkv1.DeviceSelector{Site: site, ResourceClass: rc, HardwareFacts: map[string]string{o.Fact: o.Actual}}
		g.Outliers = append(g.Outliers, &ironlinkv1.DriftOutlier{Fact: o.Fact, Expected: o.Expected, Actual: o.Actual,
			Count: int32(len(o.Devices)), Devices: o.Devices[:min(len(o.Devices), maxOutlierNames)], Summary: o.Summary,
			Selector: sel, SelectorText: devsel.Format(sel)})
	}
	return g
}

// hardwareIDs resolves a selector's hardware_facts to the devices (of
// the selector's site and resource class, within sites) whose facts have
// every value; nil when the selector has none.
func (s *Server) hardwareIDs(ctx context.Context, field string, sel *ironlinkv1.DeviceSelector, sites []string) ([]string, string, error) {
	want := sel.GetHardwareFacts()
	if len(want) == 0 {
		return nil, "", nil
	}
	if len(want) > maxSelectorValues {
		return nil, "", grpcerr.InvalidArgument(field+".hardware_facts", grpcerr.ReasonOutOfRange, field+".hardware_facts: too many facts")
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if err := textcheck.Line(field+".hardware_facts", k+"="+want[k], 512); err != nil {
			return nil, "", grpcerr.FromCheck(err)
		}
		parts = append(parts, "hw."+k+"="+want[k])
	}
	devs, err := s.store.HardwareOfDevices(ctx, sel.GetSite(), sites, sel.GetResourceClass())
	if err != nil {
		return nil, "", s.storeErr(err, "", "")
	}
	ids := []string{}
	for _, d := range s.driftFacts(devs) {
		if d.Facts != nil && factsMatch(d.Facts, want) {
			ids = append(ids, d.ID)
		}
	}
	return ids, strings.Join(parts, ","), nil
}

func factsMatch(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok {
			got = hwprofile.NoValue
		}
		if got != v {
			return false
		}
	}
	return true
}
