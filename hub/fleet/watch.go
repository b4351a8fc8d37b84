package fleet

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/feed"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Watch tuning (FleetService.WatchFleet).
const (
	// WatchPoll is how often a watcher reads the feed when nothing woke it
	// (status changes announce nothing, to keep ingest free of NOTIFY).
	WatchPoll = 500 * time.Millisecond
	// WatchProgressEvery is the longest a watcher goes without a message:
	// then it gets a progress mark (a keep-alive that also moves its cursor
	// past events its filters skipped).
	WatchProgressEvery = 5 * time.Second
	// watchBatch is how many events one feed read returns at most.
	watchBatch = 500
	// DefaultWatchSendTimeout is how long a WatchFleet consumer may leave
	// a message untaken (its flow-control window full) before the hub ends
	// the stream as fallen behind (--watch-send-timeout).
	DefaultWatchSendTimeout = time.Minute
)

// SetWatchSendTimeout sets how long a WatchFleet consumer may take no
// message before its stream ends with grpcerr.WatchFellBehind; d ≤ 0
// keeps DefaultWatchSendTimeout. Call before serving.
func (s *Server) SetWatchSendTimeout(d time.Duration) {
	if d > 0 {
		s.watchSendTimeout = d
	}
}

// watchSender sends a WatchFleet stream's messages from one goroutine so
// that a send the consumer does not take within timeout (gRPC's Send
// blocks while the stream's flow-control window is full) can be given up:
// the handler then returns WatchFellBehind, gRPC delivers the messages it
// queued already and then that status, and the blocked Send returns once
// the stream is finished.
type watchSender struct {
	in      chan *ironlinkv1.WatchFleetResponse
	out     chan error
	timeout time.Duration
	// queued is the cursor of the last message gRPC took: the last one the
	// consumer gets before a WatchFellBehind.
	queued string
}

func newWatchSender(stream ironlinkv1.FleetService_WatchFleetServer, timeout time.Duration) *watchSender {
	w := &watchSender{in: make(chan *ironlinkv1.WatchFleetResponse), out: make(chan error, 1), timeout: timeout}
	go func() {
		for m := range w.in {
			w.out <- stream.Send(m)
		}
	}()
	return w
}

// send sends m, or returns WatchFellBehind when gRPC has not taken it
// within the timeout.
func (w *watchSender) send(m *ironlinkv1.WatchFleetResponse) error {
	w.in <- m // the goroutine is idle: every send waits for its result
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case err := <-w.out:
		if err == nil {
			w.queued = m.GetCursor()
		}
		return err
	case <-t.C:
		return grpcerr.WatchFellBehind(w.queued, w.timeout)
	}
}

// close ends the sending goroutine (after a send that timed out, once
// gRPC finishes the stream).
func (w *watchSender) close() { close(w.in) }

// feedWake subscribes to the replica's LISTEN dispatcher
// (store.Notifications) on FeedNotifyChannel and returns a channel that
// receives (coalesced) wake-ups, and the function that ends the
// subscription. The dispatcher's connection runs while any watcher (or
// other subscriber) is subscribed.
func feedWake(st store.Notifier) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	stop := st.Notifications().Subscribe(feed.NotifyChannel, func(string) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	return ch, stop
}

// WatchFleet implements FleetService.WatchFleet: it validates the request,
// sends a progress mark with the starting cursor, then every event of the
// feed (hub/store/feed) that matches, each with its cursor, reading
// again when a feed source notifies and every WatchPoll, until the client
// goes away; a change read while more were already readable carries
// Behind (its age: the consumer's lag). A database failure ends the stream
// with Unavailable; a
// consumer that takes no message for the watch send timeout (it fell
// behind) gets ResourceExhausted WATCH_FELL_BEHIND naming the cursor of
// the last message it will receive; either way the client resumes from
// its last cursor, with no gap. Each read filters by the caller's
// sites as the roster says at that moment (see authn.Streams).
func (s *Server) WatchFleet(req *ironlinkv1.WatchFleetRequest, stream ironlinkv1.FleetService_WatchFleetServer) (err error) {
	ctx := stream.Context()
	if err := checkSiteFilter(req.GetSite()); err != nil {
		return err
	}
	sc := callerScope(ctx)
	if err := s.checkSiteAllowed(ctx, sc, req.GetSite()); err != nil {
		return err
	}
	f, err := watchFilter(req, sc)
	if err != nil {
		return err
	}
	var cur feed.Cursor
	if c := req.GetCursor(); c != "" {
		var err error
		if cur, err = feed.ParseCursor(c); err != nil {
			return grpcerr.InvalidArgument("cursor", grpcerr.ReasonInvalidValue, "cursor "+textcheck.Quote(c)+
				" is malformed ("+err.Error()+"): pass a cursor of a WatchFleetResponse unchanged")
		}
		ok, err := s.feed.CursorValid(ctx, cur)
		if err != nil {
			return s.storeErr(err, "", "")
		}
		if !ok {
			return grpcerr.InvalidArgument("cursor", grpcerr.ReasonInvalidValue, "cursor "+textcheck.Quote(c)+
				" is ahead of this hub's database: it comes from another hub")
		}
	}
	if f.Site != "" {
		if err := s.checkExists(ctx, f.Site, ""); err != nil {
			return err
		}
	}
	wake, unsubscribe := feedWake(s.store)
	defer unsubscribe()
	out := newWatchSender(stream, s.watchSendTimeout)
	defer out.close()
	defer func() {
		if grpcerr.Reason(err) == grpcerr.ReasonWatchFellBehind {
			s.log.WarnContext(ctx, "watch fell behind; stream ended", "client_id", sc.ClientID, "cursor", out.queued, "timeout", s.watchSendTimeout)
		}
	}()
	if req.GetCursor() == "" && !req.GetFromOldest() {
		var err error
		if cur, err = s.feed.Head(ctx); err != nil {
			return s.storeErr(err, "", "")
		}
	}
	if err := out.send(&ironlinkv1.WatchFleetResponse{Cursor: cur.String()}); err != nil {
		return err
	}
	lastSent := time.Now()
	poll := time.NewTicker(WatchPoll)
	defer poll.Stop()
	for {
		// The caller's sites as the roster says now (authn.Streams re-scopes
		// an open stream on reload): a narrowed operator's watch reads only
		// the sites still allowed from here on, and ends when the site it
		// watches is no longer one of them.
		sc = callerScope(ctx)
		if f.Site != "" && !sc.Allows(f.Site) {
			return s.deny(ctx, sc, "site "+f.Site, f.Site)
		}
		f.Sites = sc.Sites
		evs, next, more, err := s.feed.Read(ctx, cur, f, watchBatch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return s.storeErr(err, "", "")
		}
		for _, ev := range evs {
			m := &ironlinkv1.WatchFleetResponse{Cursor: ev.Cursor.String(), Event: eventToProto(ev)}
			if more { // more already readable after this page: the stream is behind
				m.Behind = durationpb.New(max(time.Since(ev.At), 0))
			}
			if err := out.send(m); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		if len(evs) == 0 && time.Since(lastSent) >= WatchProgressEvery {
			if err := out.send(&ironlinkv1.WatchFleetResponse{Cursor: next.String()}); err != nil {
				return err
			}
			lastSent = time.Now()
		}
		cur = next
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C:
		}
	}
}

// watchFilter is the feed filter of a WatchFleet request for a caller of
// scope sc, or InvalidArgument naming a status or kind that is not a
// valid filter.
func watchFilter(req *ironlinkv1.WatchFleetRequest, sc siteScope) (feed.Filter, error) {
	f := feed.Filter{Site: req.GetSite(), Sites: sc.Sites}
	for i, st := range req.GetStatuses() {
		hs, ok := statusFromProto(st)
		if !ok {
			return f, grpcerr.InvalidArgument(fmt.Sprintf("statuses[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("status %v is not a valid filter", st))
		}
		f.Statuses = append(f.Statuses, hs)
	}
	for i, k := range req.GetKinds() {
		sk, ok := feedKinds[k]
		if !ok {
			return f, grpcerr.InvalidArgument(fmt.Sprintf("kinds[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("kind %v is not a valid filter", k))
		}
		f.Kinds = append(f.Kinds, sk)
	}
	return f, nil
}

// feedKinds maps the kinds a WatchFleetRequest may filter on to the store's.
var feedKinds = map[ironlinkv1.FleetEventKind]feed.Kind{
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_DEVICE_STATUS:   feed.EventDeviceStatus,
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_COMMAND_STATE:   feed.EventCommandState,
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_OPERATION_STATE: feed.EventOperationState,
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_POLICY_DECISION: feed.EventPolicyDecision,
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_PENDING_ACTION:  feed.EventPendingAction,
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_REMEDIATION:     feed.EventRemediation,
	ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_VALIDATION:      feed.EventValidation,
}

// eventToProto converts a feed event.
func eventToProto(ev feed.Event) *ironlinkv1.FleetEvent {
	p := &ironlinkv1.FleetEvent{EventTime: timestamppb.New(ev.At)}
	switch {
	case ev.Status != nil:
		e := ev.Status
		p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_DEVICE_STATUS
		p.Change = &ironlinkv1.FleetEvent_DeviceStatus{DeviceStatus: &ironlinkv1.DeviceStatusEvent{
			DeviceId: e.DeviceID, Site: e.Site, Name: e.Name, Status: statusToProto(e.Status), Reason: e.Reason,
			PreviousStatus: statusToProto(e.Previous),
		}}
	case ev.Command != nil:
		e := ev.Command
		p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_COMMAND_STATE
		var prev ironlinkv1.CommandState
		if e.Previous != "" {
			prev = commandStateToProto(e.Previous)
		}
		p.Change = &ironlinkv1.FleetEvent_CommandState{CommandState: &ironlinkv1.CommandStateEvent{
			Command: commandToProto(e.Command), PreviousState: prev, DeviceName: e.DeviceName,
		}}
	case ev.Operation != nil:
		e := ev.Operation
		p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_OPERATION_STATE
		var prev ironlinkv1.OperationState
		if e.Previous != "" {
			prev = operations.StateFromStore(e.Previous)
		}
		p.Change = &ironlinkv1.FleetEvent_OperationState{OperationState: &ironlinkv1.OperationStateEvent{
			Operation: operations.ToProto(e.Operation), PreviousState: prev,
		}}
	case ev.Decision != nil:
		e := ev.Decision
		p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_POLICY_DECISION
		p.Change = &ironlinkv1.FleetEvent_PolicyDecision{PolicyDecision: &ironlinkv1.PolicyDecisionEvent{
			Decision: policyapi.DecisionToProto(e.Decision), DeviceName: e.DeviceName,
		}}
	case ev.Pending != nil:
		e := ev.Pending
		p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_PENDING_ACTION
		p.Change = &ironlinkv1.FleetEvent_PendingAction{PendingAction: &ironlinkv1.PendingActionEvent{
			PendingAction: policyapi.PendingToProto(e.Action),
			PreviousState: ironlinkv1.PendingActionState(ironlinkv1.PendingActionState_value["PENDING_ACTION_STATE_"+e.Previous]),
		}}
	case ev.Remediation != nil:
		e := ev.Remediation
		p.Kind = ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_REMEDIATION
		p.Change = &ironlinkv1.FleetEvent_Remediation{Remediation: &ironlinkv1.RemediationEvent{DeviceId: e.DeviceID,
			DeviceName: e.DeviceName, Site: e.Site, Rule: e.Rule, Event: e.Event, Step: int32(e.Step), Kind: e.Kind,
			OperationId: e.OperationID, LadderId: e.LadderID, HandoffId: e.HandoffID, Detail: e.Detail}}
	case ev.Validation != nil:
		validationEventToProto(p, ev.Validation)
	}
	return p
}
