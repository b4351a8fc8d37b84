package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// Site is a satellite scripted at the store's level: it opens a link and
// commits batches under the link's epoch exactly as the link server does
// for each ConditionBatch; like the real satellite after each poll, every
// Send is followed by the site conditions InventoryPolled=True and
// ListingConsistent=True observed at Now (the poll-success mark the
// policy's fresh-evidence rule reads), unless NoPollMark is set.
type Site struct {
	tb    testing.TB
	st    *store.Store
	Name  string
	Epoch int64
	Seq   uint64
	// IDs are the site's devices, named <site>-000, <site>-001, ...
	IDs []string
	// Now is the satellite's clock (a test's fake clock, or time.Now).
	Now func() time.Time
	// NoPollMark: Send commits the batch alone (no site conditions).
	NoPollMark bool
}

// NewSite opens a link for site name and reports n healthy, customer-ready
// devices observed at now() (nil: time.Now).
func NewSite(tb testing.TB, st *store.Store, name string, n int, now func() time.Time) *Site {
	tb.Helper()
	if now == nil {
		now = time.Now
	}
	s := &Site{tb: tb, st: st, Name: name, Now: now}
	for range n {
		s.IDs = append(s.IDs, uuid.NewString())
	}
	s.Connect()
	at := s.Now()
	ups := make([]store.DeviceUpdate, 0, n)
	for i, id := range s.IDs {
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: Healthy(at), ObservedTime: at, Facts: &store.Facts{Name: fmt.Sprintf("%s-%03d", name, i)}})
	}
	s.Send(ups)
	return s
}

// Connect opens a new link for the site (a reconnect: a new epoch).
func (s *Site) Connect() {
	s.tb.Helper()
	sess, err := s.st.OpenLink(context.Background(), store.LinkHello{Site: s.Name, BootID: "b", Replica: "r1"})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.Epoch = sess.Epoch
}

// Send commits one batch of ups under the link's epoch, with the next sequence.
func (s *Site) Send(ups []store.DeviceUpdate) {
	s.tb.Helper()
	s.Seq++
	if _, err := s.st.ApplyBatch(context.Background(), s.Name, s.Epoch, store.Batch{Sequence: s.Seq, Devices: ups}); err != nil {
		s.tb.Fatal(err)
	}
	if !s.NoPollMark {
		s.Polled()
	}
}

// Polled reports a successful poll without hazards, observed at Now: the
// site conditions InventoryPolled=True/PollSucceeded and
// ListingConsistent=True/NoHazards.
func (s *Site) Polled() {
	s.tb.Helper()
	at := s.Now()
	s.SiteConditions(
		condition.Condition{Type: condition.InventoryPolled, Status: condition.True, Reason: condition.ReasonPollSucceeded, LastTransitionTime: at, ObservedTime: at},
		condition.Condition{Type: condition.ListingConsistent, Status: condition.True, Reason: condition.ReasonNoHazards, LastTransitionTime: at, ObservedTime: at})
}

// PollFailed reports a failed poll observed at Now
// (InventoryPolled=False/PollFailed with msg).
func (s *Site) PollFailed(msg string) {
	s.tb.Helper()
	at := s.Now()
	s.SiteConditions(
		condition.Condition{Type: condition.InventoryPolled, Status: condition.False, Reason: condition.ReasonPollFailed, Message: msg, LastTransitionTime: at, ObservedTime: at},
		condition.Condition{Type: condition.ListingConsistent, Status: condition.True, Reason: condition.ReasonNoHazards, LastTransitionTime: at, ObservedTime: at})
}

// SiteConditions replaces the site's conditions with conds under the
// link's epoch, as the link server does for a SiteConditions message.
func (s *Site) SiteConditions(conds ...condition.Condition) {
	s.tb.Helper()
	if _, err := s.st.ReplaceSiteConditions(context.Background(), s.Name, s.Epoch, conds); err != nil {
		s.tb.Fatal(err)
	}
}

// Cut ends the site's link as the link server does when the stream ends
// (the site is not UNREACHABLE until stale-after passes).
func (s *Site) Cut() {
	s.tb.Helper()
	if err := s.st.CloseLink(context.Background(), s.Name, s.Epoch); err != nil {
		s.tb.Fatal(err)
	}
}

// Fault reports devices ids FAULTED (ProvisioningHealthy False with
// reason), the fault having begun at began; observed now.
func (s *Site) Fault(ids []string, reason string, began time.Time) {
	s.tb.Helper()
	ups := make([]store.DeviceUpdate, 0, len(ids))
	for _, id := range ids {
		at := s.Now()
		c := Healthy(at)
		for i := range c {
			if c[i].Type == condition.ProvisioningHealthy {
				c[i].Status, c[i].Reason, c[i].Message, c[i].LastTransitionTime = condition.False, reason, "last_error: deploy timed out", began
			}
		}
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: c, ObservedTime: at})
	}
	s.Send(ups)
}

// Heal reports device id healthy again, observed now.
func (s *Site) Heal(id string) {
	s.tb.Helper()
	at := s.Now()
	s.Send([]store.DeviceUpdate{{DeviceID: id, Conditions: Healthy(at), ObservedTime: at}})
}

// Healthy is every condition of a healthy, customer-ready (AVAILABLE)
// device, transitioned and observed at at.
func Healthy(at time.Time) []condition.Condition {
	good := map[condition.Type]condition.Status{
		condition.Enrolled: condition.True, condition.ProvisioningHealthy: condition.True,
		condition.MaintenanceClear: condition.True, condition.InValidationPool: condition.False,
		condition.InstanceAllocated: condition.False, condition.CustomerAllocated: condition.False,
		condition.CustomerReady: condition.True,
	}
	out := make([]condition.Condition, 0, len(condition.Types))
	for _, typ := range condition.Types {
		out = append(out, condition.Condition{Type: typ, Status: good[typ], Reason: "Ok", LastTransitionTime: at, ObservedTime: at})
	}
	return out
}
