package link

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/wire"
)

// MaxDevicesPerBatch is the most device updates one ConditionBatch may carry;
// larger batches are refused with ResourceExhausted.
const MaxDevicesPerBatch = 1000

// MaxSiteConditions is the most conditions one SiteConditions message may
// carry; more is refused with InvalidArgument.
const MaxSiteConditions = 16

// Limits on the instance mismatches of one device's facts (see
// proto InstanceMismatch); anything beyond them is refused with
// InvalidArgument, closing the link without writing the batch.
const (
	// MaxInstanceMismatches is the most mismatches one device may report.
	MaxInstanceMismatches = 16
	// MaxMismatchIDBytes bounds ironic_instance_uuid, nova_server_id and
	// nova_project_id, in bytes.
	MaxMismatchIDBytes = 64
	// MaxMismatchStatusBytes bounds nova_server_status, in bytes.
	MaxMismatchStatusBytes = 32
)

// Config tunes the link server.
type Config struct {
	// Replica names this hub process in the sites table and logs.
	Replica string
	// HeartbeatInterval is how often the hub sends a heartbeat on an idle link
	// (default 20 s, well under common 60 s load-balancer idle timeouts).
	HeartbeatInterval time.Duration
	// CommandSweep is how often each link checks for due commands without a
	// notification (default 5 s).
	CommandSweep time.Duration
	// Delivery says when unfinished commands go out again.
	Delivery store.DeliveryPolicy
	// HelloTimeout bounds the wait for the first message (default 30 s).
	HelloTimeout time.Duration
	// Hooks are told of link, batch and command events (metrics).
	Hooks Hooks
}

func (c *Config) defaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 20 * time.Second
	}
	if c.CommandSweep <= 0 {
		c.CommandSweep = 5 * time.Second
	}
	if c.Delivery.ResendAfter <= 0 {
		c.Delivery.ResendAfter = 30 * time.Second
	}
	if c.Delivery.FailureBackoff <= 0 {
		c.Delivery.FailureBackoff = 10 * time.Second
	}
	if c.Delivery.MaxFailureBackoff <= 0 {
		c.Delivery.MaxFailureBackoff = 5 * time.Minute
	}
	if c.HelloTimeout <= 0 {
		c.HelloTimeout = 30 * time.Second
	}
}

// Server implements ironlinkv1.LinkServiceServer.
type Server struct {
	ironlinkv1.UnimplementedLinkServiceServer
	store *store.Store
	cfg   Config
	log   *slog.Logger

	mu       sync.Mutex
	links    map[string]*conn
	draining bool
}

// errSuperseded cancels a link that a newer link of the same site replaced.
var errSuperseded = errors.New("superseded by a newer link for the same site")

// errDraining cancels every link when the replica shuts down.
var errDraining = errors.New("hub replica draining")

// errRevoked cancels a link whose client lost its place in the roster.
var errRevoked = errors.New("client removed from the roster")

// conn is one open link on this replica.
type conn struct {
	site   string
	id     *auth.Identity // nil without authentication
	wake   chan struct{}
	cancel context.CancelCauseFunc
}

// NewServer returns a link server over st.
func NewServer(st *store.Store, cfg Config, log *slog.Logger) *Server {
	cfg.defaults()
	return &Server{store: st, cfg: cfg, log: log, links: map[string]*conn{}}
}

// Wake tells the link of site on this replica, if any, to look for due commands now.
func (s *Server) Wake(site string) {
	s.mu.Lock()
	c := s.links[site]
	s.mu.Unlock()
	if c != nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// ListenForCommands LISTENs on store.NotifyChannel over a dedicated
// connection to databaseURL (reconnecting after a second when it drops) and
// wakes the matching link for each notification. It blocks until ctx ends.
func (s *Server) ListenForCommands(ctx context.Context, databaseURL string) error {
	l := &pgxlisten.Listener{
		Connect:        func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, databaseURL) },
		LogError:       func(_ context.Context, err error) { s.log.Warn("command listener", "err", err) },
		ReconnectDelay: time.Second,
	}
	l.Handle(store.NotifyChannel, pgxlisten.HandlerFunc(func(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
		s.Wake(n.Payload)
		return nil
	}))
	err := l.Listen(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// RunStaleSweep marks sites silent for longer than staleAfter as stale every
// staleAfter/6 (at least every second) until ctx ends.
func (s *Server) RunStaleSweep(ctx context.Context, staleAfter time.Duration) {
	every := max(staleAfter/6, time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sites, err := s.store.MarkStaleSites(ctx, staleAfter)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("stale sweep failed", "err", err)
			}
			for _, site := range sites {
				s.log.Warn("site unreachable: silent for longer than stale_after", "site", site, "stale_after", staleAfter)
			}
		}
	}
}

// Drain ends every link on this replica with Unavailable ("draining;
// reconnect"), so satellites move to another replica at once instead of
// waiting for the connection to be cut. New links are refused from now on.
// Nothing is lost: unacked batches are resent and unfinished commands are
// delivered again on the satellites' next links.
func (s *Server) Drain() {
	s.mu.Lock()
	s.draining = true
	links := make([]*conn, 0, len(s.links))
	for _, c := range s.links {
		links = append(links, c)
	}
	s.mu.Unlock()
	for _, c := range links {
		c.cancel(errDraining)
	}
	s.log.Info("draining links", "count", len(links))
}

// RevokeUnauthorized ends every link whose client the roster r no longer
// authorizes to report (removed client, removed key, lost scope or site),
// with Unauthenticated. Healthy links are left alone. Call it after each
// roster reload.
func (s *Server) RevokeUnauthorized(r *auth.Roster) {
	s.mu.Lock()
	var revoke []*conn
	for _, c := range s.links {
		if c.id != nil && !r.StillAuthorized(*c.id, auth.ScopeDeviceConditionCreate) {
			revoke = append(revoke, c)
		}
	}
	s.mu.Unlock()
	for _, c := range revoke {
		s.log.Warn("closing link: client no longer in the roster", "site", c.site, "client_id", c.id.ClientID, "kid", c.id.KeyID)
		c.cancel(errRevoked)
	}
}

// Links returns the number of links open on this replica.
func (s *Server) Links() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.links)
}

func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return false
	}
	old := s.links[c.site]
	s.links[c.site] = c
	s.mu.Unlock()
	if old != nil {
		old.cancel(errSuperseded)
	}
	return true
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	if s.links[c.site] == c {
		delete(s.links, c.site)
	}
	s.mu.Unlock()
}

// Connect serves one satellite link until it ends.
func (s *Server) Connect(stream ironlinkv1.LinkService_ConnectServer) (err error) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return status.Error(codes.Unavailable, "hub replica draining; reconnect")
	}
	hello, err := s.recvHello(stream)
	if err != nil {
		return err
	}
	site := hello.GetSite()
	log := s.log.With("site", site, "boot_id", hello.GetBootId())
	var id *auth.Identity
	if ident, ok := authn.FromContext(stream.Context()); ok {
		if ident.Site != site {
			log.Warn("hello refused: site is not the client's", "client_id", ident.ClientID, "client_site", ident.Site)
			return status.Errorf(codes.PermissionDenied, "client %s may only link site %q, not %q", ident.ClientID, ident.Site, site)
		}
		id = &ident
		log = log.With("client_id", ident.ClientID)
	}
	sess, err := s.store.OpenLink(stream.Context(), store.LinkHello{
		Site: site, BootID: hello.GetBootId(), Version: hello.GetVersion(),
		Capabilities: hello.GetCapabilities(), Replica: s.cfg.Replica,
	})
	if err != nil {
		log.Error("open link", "err", err)
		return status.Error(codes.Unavailable, "hub cannot record the link now; retry")
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	c := &conn{site: site, id: id, wake: make(chan struct{}, 1), cancel: cancel}
	if !s.register(c) {
		return status.Error(codes.Unavailable, "hub replica draining; reconnect")
	}
	defer func() {
		s.unregister(c)
		closeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer done()
		if err := s.store.CloseLink(closeCtx, site, sess.Epoch); err != nil {
			log.Warn("close link", "err", err)
		}
	}()
	log.Info("link opened", "epoch", sess.Epoch, "last_sequence", sess.LastSequence, "version", hello.GetVersion())
	s.cfg.Hooks.opened(site)
	defer func() { s.cfg.Hooks.ended(site, ctx, err) }()

	if err := stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Welcome{Welcome: &ironlinkv1.Welcome{
		LastCommittedSequence:    sess.LastSequence,
		Epoch:                    sess.Epoch,
		HeartbeatIntervalSeconds: int32(s.cfg.HeartbeatInterval / time.Second),
		Replica:                  s.cfg.Replica,
		LastCommittedBootId:      sess.LastSequenceBootID,
	}}}); err != nil {
		return err
	}

	// One reader goroutine; this goroutine alone handles messages and sends.
	// The unbuffered channel is the backpressure: the reader waits until the
	// previous message has been committed.
	msgs := make(chan *ironlinkv1.ConnectRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	l := &linkLoop{s: s, stream: stream, site: site, epoch: sess.Epoch, id: id, log: log}
	if err := l.sendDesiredStates(ctx); err != nil {
		return err
	}
	if err := l.deliver(ctx, true); err != nil {
		return err
	}
	// Batches are committed by a committer goroutine, one at a time and in
	// order, so that a slow commit never holds up command delivery, results
	// or heartbeats on this loop. At most maxPendingBatches wait for it;
	// beyond that this loop stops reading the stream (backpressure).
	const maxPendingBatches = 4
	toCommit := make(chan store.Batch)
	committed := make(chan commitResult, 1)
	go l.committer(ctx, toCommit, committed)
	var pending []store.Batch
	hb := time.NewTicker(s.cfg.HeartbeatInterval)
	defer hb.Stop()
	sweep := time.NewTicker(s.cfg.CommandSweep)
	defer sweep.Stop()
	for {
		var err error
		in := msgs
		if len(pending) >= maxPendingBatches {
			in = nil
		}
		var out chan<- store.Batch
		var next store.Batch
		if len(pending) > 0 {
			out, next = toCommit, pending[0]
		}
		select {
		case out <- next:
			pending = pending[1:]
		case r := <-committed:
			err = l.acked(r)
		case <-ctx.Done():
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errSuperseded):
				log.Info("link superseded by a newer link")
				return status.Error(codes.Aborted, "link superseded by a newer link for this site; reconnect")
			case errors.Is(cause, errDraining):
				log.Info("link drained")
				return status.Error(codes.Unavailable, "hub replica draining; reconnect")
			case errors.Is(cause, errRevoked):
				return status.Error(codes.Unauthenticated, "client removed from the hub's roster")
			}
			return status.FromContextError(ctx.Err()).Err()
		case err = <-recvErr:
			if errors.Is(err, io.EOF) {
				log.Info("link closed by satellite")
				return nil
			}
			log.Info("link ended", "err", err)
			return err
		case m := <-in:
			if pb := m.GetBatch(); pb != nil {
				var b store.Batch
				if b, err = ToBatch(pb); err != nil {
					l.log.Warn("batch refused", "err", err)
				} else {
					l.noteSkew(ClampBatch(&b, time.Now()))
					pending = append(pending, b)
				}
			} else {
				err = l.handle(ctx, m)
			}
		case <-c.wake:
			err = l.deliver(ctx, false)
		case <-sweep.C:
			err = l.deliver(ctx, false)
		case <-hb.C:
			err = stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Heartbeat{
				Heartbeat: &ironlinkv1.Heartbeat{SentTime: timestamppb.Now()}}})
		}
		if err != nil {
			if errors.Is(err, store.ErrFenced) {
				log.Info("link fenced by a newer link")
				return status.Error(codes.Aborted, "link superseded by a newer link for this site; reconnect")
			}
			return err
		}
	}
}

func (s *Server) recvHello(stream ironlinkv1.LinkService_ConnectServer) (*ironlinkv1.Hello, error) {
	type result struct {
		m   *ironlinkv1.ConnectRequest
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		ch <- result{m, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(s.cfg.HelloTimeout):
		return nil, status.Error(codes.DeadlineExceeded, "no hello within the hello timeout")
	}
	if r.err != nil {
		return nil, r.err
	}
	h := r.m.GetHello()
	switch {
	case h == nil:
		return nil, status.Error(codes.InvalidArgument, "the first message of a link must be a hello")
	case !sitename.Valid(h.GetSite()):
		return nil, status.Errorf(codes.InvalidArgument, "hello: site %q is not a valid site name ([a-z0-9-], 1-63 bytes)", h.GetSite())
	case len(h.GetBootId()) > 128 || len(h.GetVersion()) > 128 || len(h.GetCapabilities()) > 32:
		return nil, status.Error(codes.InvalidArgument, "hello: boot_id, version or capabilities too long")
	}
	return h, nil
}

// linkLoop holds the per-link state used by the owning goroutine.
type linkLoop struct {
	s      *Server
	stream ironlinkv1.LinkService_ConnectServer
	site   string
	epoch  int64
	id     *auth.Identity
	log    *slog.Logger
	// skewWarned is set once the link has logged that the satellite's
	// clock runs ahead.
	skewWarned bool
}

// noteSkew logs, once per link, that the satellite sent times in the
// future (sk from ClampBatch or ClampConditions); nothing when sk is zero.
func (l *linkLoop) noteSkew(sk Skew) {
	if sk.Ahead <= 0 || l.skewWarned {
		return
	}
	l.skewWarned = true
	ahead := sk.Ahead.Round(time.Second).String()
	if sk.Ahead == math.MaxInt64 {
		ahead = "over 290 years" // time.Duration saturated
	}
	l.log.Warn(fmt.Sprintf("satellite clock ahead by %s: its times more than %s in the future are replaced by the hub's receive time (warned once per link)",
		ahead, store.MaxClockSkew), "satellite_time", sk.Latest, "hub_time", sk.Now)
}

// Skew describes timestamps of one message that lay more than
// store.MaxClockSkew in the future and were clamped; the zero Skew means
// none did.
type Skew struct {
	// Ahead is how far the latest clamped time lay ahead of Now (saturating
	// at the largest time.Duration).
	Ahead time.Duration
	// Latest is the latest clamped time as the satellite sent it.
	Latest time.Time
	// Now is the receive time the clamped times were replaced with.
	Now time.Time
}

// clamp returns t, or now when t lies more than store.MaxClockSkew after
// now, recording the clamp in sk.
func (sk *Skew) clamp(t, now time.Time) time.Time {
	if !t.After(now.Add(store.MaxClockSkew)) {
		return t
	}
	if t.After(sk.Latest) {
		sk.Latest, sk.Now, sk.Ahead = t, now, t.Sub(now)
	}
	return now
}

// ClampBatch replaces every time in b that lies more than
// store.MaxClockSkew after now (the hub's receive time) by now: device
// observed times, condition observed and last-transition times, and the
// first-seen times of instance mismatches. A satellite whose clock runs
// ahead would otherwise store times that make every later, genuine report
// look older and be ignored. It returns what it clamped.
func ClampBatch(b *store.Batch, now time.Time) Skew {
	var sk Skew
	for i := range b.Devices {
		d := &b.Devices[i]
		d.ObservedTime = sk.clamp(d.ObservedTime, now)
		sk.clampConditions(d.Conditions, now)
		if d.Facts != nil {
			for j := range d.Facts.InstanceMismatches {
				m := &d.Facts.InstanceMismatches[j]
				m.FirstSeenTime = sk.clamp(m.FirstSeenTime, now)
			}
		}
	}
	return sk
}

// ClampConditions is ClampBatch for a list of conditions (a site's set):
// observed and last-transition times.
func ClampConditions(cs []condition.Condition, now time.Time) Skew {
	var sk Skew
	sk.clampConditions(cs, now)
	return sk
}

func (sk *Skew) clampConditions(cs []condition.Condition, now time.Time) {
	for i := range cs {
		cs[i].ObservedTime = sk.clamp(cs[i].ObservedTime, now)
		cs[i].LastTransitionTime = sk.clamp(cs[i].LastTransitionTime, now)
	}
}

func (l *linkLoop) handle(ctx context.Context, m *ironlinkv1.ConnectRequest) error {
	switch msg := m.GetMsg().(type) {
	case *ironlinkv1.ConnectRequest_CommandResult:
		return l.handleResult(ctx, msg.CommandResult)
	case *ironlinkv1.ConnectRequest_Heartbeat:
		return l.s.store.Touch(ctx, l.site, l.epoch)
	case *ironlinkv1.ConnectRequest_DesiredStatesRequest:
		return l.sendDesiredStates(ctx)
	case *ironlinkv1.ConnectRequest_DriftCorrection:
		return l.handleCorrection(ctx, msg.DriftCorrection)
	case *ironlinkv1.ConnectRequest_SiteConditions:
		return l.handleSiteConditions(ctx, msg.SiteConditions)
	case *ironlinkv1.ConnectRequest_Hello:
		return status.Error(codes.InvalidArgument, "hello may only be the first message of a link")
	default:
		return status.Error(codes.InvalidArgument, "empty or unknown message")
	}
}

// ToBatch validates a wire batch and converts it. Errors are gRPC statuses:
// InvalidArgument for malformed content, ResourceExhausted for oversized batches.
func ToBatch(b *ironlinkv1.ConditionBatch) (store.Batch, error) {
	if b.GetSequence() == 0 {
		return store.Batch{}, status.Error(codes.InvalidArgument, "batch: sequence must be > 0")
	}
	if n := len(b.GetDevices()); n > MaxDevicesPerBatch {
		return store.Batch{}, status.Errorf(codes.ResourceExhausted, "batch %d: %d devices, limit %d", b.GetSequence(), n, MaxDevicesPerBatch)
	}
	out := store.Batch{Sequence: b.GetSequence()}
	if sp := b.GetSnapshot(); sp != nil {
		if sp.GetSnapshotId() == "" || len(sp.GetSnapshotId()) > 64 {
			return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d: snapshot_id must be 1-64 bytes", b.GetSequence())
		}
		out.SnapshotID, out.SnapshotFinal = sp.GetSnapshotId(), sp.GetFinal()
	}
	seen := make(map[string]bool, len(b.GetDevices()))
	for i, d := range b.GetDevices() {
		id, err := uuid.Parse(d.GetDeviceId())
		if err != nil {
			return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %d: device_id %q is not a UUID", b.GetSequence(), i, d.GetDeviceId())
		}
		key := id.String()
		if seen[key] {
			return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d: device %s appears twice", b.GetSequence(), key)
		}
		seen[key] = true
		if d.GetObservedTime() == nil || d.GetObservedTime().CheckValid() != nil {
			return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %s: observed_time missing or invalid", b.GetSequence(), key)
		}
		u := store.DeviceUpdate{DeviceID: key, Removed: d.GetRemoved(), ObservedTime: d.GetObservedTime().AsTime()}
		if len(d.GetConditions()) > 7 {
			return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %s: %d conditions, at most 7", b.GetSequence(), key, len(d.GetConditions()))
		}
		types := map[string]bool{}
		for _, pc := range d.GetConditions() {
			c, err := wire.ConditionFromProto(pc)
			if err != nil {
				return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %s: %v", b.GetSequence(), key, err)
			}
			if types[string(c.Type)] {
				return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %s: condition %s appears twice", b.GetSequence(), key, c.Type)
			}
			types[string(c.Type)] = true
			u.Conditions = append(u.Conditions, c)
		}
		if f := d.GetFacts(); f != nil {
			u.Facts = &store.Facts{
				Name: f.GetName(), ProvisionState: f.GetProvisionState(), PowerState: f.GetPowerState(),
				Maintenance: f.GetMaintenance(), ResourceClass: f.GetResourceClass(), InstanceUUID: f.GetInstanceUuid(),
				Lessee: f.GetLessee(), Owner: f.GetOwner(), ConductorGroup: f.GetConductorGroup(), Fault: f.GetFault(),
			}
			if len(u.Facts.Name) > 255 {
				return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %s: name longer than 255 bytes", b.GetSequence(), key)
			}
			if u.Facts.InstanceMismatches, err = toMismatches(f.GetInstanceMismatches()); err != nil {
				return store.Batch{}, status.Errorf(codes.InvalidArgument, "batch %d device %s: %v", b.GetSequence(), key, err)
			}
		}
		out.Devices = append(out.Devices, u)
	}
	return out, nil
}

// toMismatches validates and converts a device's instance mismatches: at
// most MaxInstanceMismatches, each with a kind, ids of at most
// MaxMismatchIDBytes, a status of at most MaxMismatchStatusBytes and a valid
// first_seen_time. It returns nil for none.
func toMismatches(ms []*ironlinkv1.InstanceMismatch) ([]store.InstanceMismatch, error) {
	if len(ms) > MaxInstanceMismatches {
		return nil, fmt.Errorf("%d instance mismatches, at most %d", len(ms), MaxInstanceMismatches)
	}
	var out []store.InstanceMismatch
	for i, m := range ms {
		var kind store.MismatchKind
		switch m.GetKind() {
		case ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN:
			kind = store.MismatchNovaUnknown
		case ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE:
			kind = store.MismatchNodeUnaware
		default:
			return nil, fmt.Errorf("instance mismatch %d: kind %v is not NOVA_UNKNOWN or NODE_UNAWARE", i, m.GetKind())
		}
		for _, f := range [...]struct{ name, v string }{
			{"ironic_instance_uuid", m.GetIronicInstanceUuid()}, {"nova_server_id", m.GetNovaServerId()}, {"nova_project_id", m.GetNovaProjectId()},
		} {
			if len(f.v) > MaxMismatchIDBytes {
				return nil, fmt.Errorf("instance mismatch %d: %s is %d bytes, limit %d", i, f.name, len(f.v), MaxMismatchIDBytes)
			}
		}
		if n := len(m.GetNovaServerStatus()); n > MaxMismatchStatusBytes {
			return nil, fmt.Errorf("instance mismatch %d: nova_server_status is %d bytes, limit %d", i, n, MaxMismatchStatusBytes)
		}
		if m.GetFirstSeenTime() == nil || m.GetFirstSeenTime().CheckValid() != nil {
			return nil, fmt.Errorf("instance mismatch %d: first_seen_time missing or invalid", i)
		}
		out = append(out, store.InstanceMismatch{
			Kind: kind, IronicInstanceUUID: m.GetIronicInstanceUuid(), NovaServerID: m.GetNovaServerId(),
			NovaServerStatus: m.GetNovaServerStatus(), NovaProjectID: m.GetNovaProjectId(),
			FirstSeenTime: m.GetFirstSeenTime().AsTime(),
		})
	}
	return out, nil
}

// ToSiteConditions validates a wire SiteConditions message and converts it:
// at most MaxSiteConditions conditions of distinct site types, each valid by
// condition.Condition.ValidateSite. A nil message is the empty set. Errors
// are InvalidArgument statuses naming the bad condition.
func ToSiteConditions(sc *ironlinkv1.SiteConditions) ([]condition.Condition, error) {
	if n := len(sc.GetConditions()); n > MaxSiteConditions {
		return nil, status.Errorf(codes.InvalidArgument, "site conditions: %d conditions, at most %d", n, MaxSiteConditions)
	}
	out := make([]condition.Condition, 0, len(sc.GetConditions()))
	seen := map[condition.Type]bool{}
	for _, pc := range sc.GetConditions() {
		c, err := wire.SiteConditionFromProto(pc)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "site conditions: %v", err)
		}
		if seen[c.Type] {
			return nil, status.Errorf(codes.InvalidArgument, "site conditions: condition %s appears twice", c.Type)
		}
		seen[c.Type] = true
		out = append(out, c)
	}
	return out, nil
}

// handleSiteConditions replaces the site's stored site conditions with the
// message's set, under this link's epoch (a superseded link gets ErrFenced
// and writes nothing).
func (l *linkLoop) handleSiteConditions(ctx context.Context, sc *ironlinkv1.SiteConditions) error {
	conds, err := ToSiteConditions(sc)
	if err != nil {
		l.log.Warn("site conditions refused", "err", err)
		return err
	}
	l.noteSkew(ClampConditions(conds, time.Now()))
	res, err := l.s.store.ReplaceSiteConditions(ctx, l.site, l.epoch, conds)
	switch {
	case errors.Is(err, store.ErrFenced):
		return err
	case err != nil:
		l.log.Error("record site conditions", "err", err)
		return status.Error(codes.Unavailable, "hub could not record the site conditions; reconnect and resend")
	case !res.Applied:
		l.log.Info("site conditions older than the stored ones ignored")
		return nil
	}
	attrs := make([]any, 0, 2*len(conds))
	for _, c := range conds {
		attrs = append(attrs, string(c.Type), string(c.Status)+"/"+c.Reason)
	}
	// A set that only refreshes observed times (the satellite resends its
	// set on every link and on each poll's signal) is not news.
	if res.Changed {
		l.log.Info("site conditions changed", attrs...)
	} else {
		l.log.Debug("site conditions unchanged", attrs...)
	}
	return nil
}

// commitResult is the committer's answer for one batch.
type commitResult struct {
	batch store.Batch
	res   store.BatchResult
	err   error
	took  time.Duration
}

// committer commits batches from in, in order, and reports each on out.
func (l *linkLoop) committer(ctx context.Context, in <-chan store.Batch, out chan<- commitResult) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-in:
			start := time.Now()
			res, err := l.s.store.ApplyBatch(ctx, l.site, l.epoch, b)
			select {
			case out <- commitResult{batch: b, res: res, err: err, took: time.Since(start)}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// acked turns a commit result into an ack on the stream, or into the
// status that ends the link.
func (l *linkLoop) acked(r commitResult) error {
	b, res, err := r.batch, r.res, r.err
	switch {
	case errors.Is(err, store.ErrWrongSite):
		l.log.Warn("batch refused", "err", err)
		return status.Error(codes.PermissionDenied, err.Error())
	case err != nil:
		if errors.Is(err, store.ErrFenced) {
			return err
		}
		l.log.Error("commit batch", "sequence", b.Sequence, "err", err)
		return status.Error(codes.Unavailable, "hub could not commit the batch; reconnect and resend")
	}
	l.log.Debug("batch committed", "sequence", b.Sequence, "devices", len(b.Devices), "snapshot", b.SnapshotID != "",
		"duplicate", res.Duplicate, "rows", res.RowsWritten, "took", r.took)
	l.s.cfg.Hooks.committed(l.site, b, res, r.took)
	return l.stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Ack{Ack: &ironlinkv1.BatchAck{
		Sequence: b.Sequence, Duplicate: res.Duplicate}}})
}

func (l *linkLoop) handleResult(ctx context.Context, r *ironlinkv1.CommandResult) error {
	if l.id != nil && !l.id.HasScope(auth.ScopeDeviceUpdate) {
		return status.Errorf(codes.PermissionDenied, "client %s lacks scope %s needed to report command results", l.id.ClientID, auth.ScopeDeviceUpdate)
	}
	cid, err1 := uuid.Parse(r.GetCommandId())
	did, err2 := uuid.Parse(r.GetDeviceId())
	if err1 != nil || err2 != nil {
		return status.Errorf(codes.InvalidArgument, "command result: command_id %q / device_id %q must be UUIDs", r.GetCommandId(), r.GetDeviceId())
	}
	ignored, err := l.s.store.RecordResult(ctx, l.site, store.CommandResult{
		CommandID: cid.String(), DeviceID: did.String(), Generation: r.GetGeneration(),
		Success: r.GetSuccess(), Error: truncate(r.GetError(), 2048), Detail: truncate(r.GetDetail(), 2048),
	})
	switch {
	case errors.Is(err, store.ErrWrongSite):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, store.ErrNotFound):
		l.log.Warn("result for unknown command ignored", "command_id", cid)
		return nil
	case err != nil:
		l.log.Error("record command result", "err", err)
		return status.Error(codes.Unavailable, "hub could not record the result; reconnect and resend")
	}
	l.s.cfg.Hooks.result(l.site, cid.String(), r.GetSuccess(), ignored)
	l.log.Info("command result", "command_id", cid, "device_id", did, "generation", r.GetGeneration(),
		"success", r.GetSuccess(), "ignored", ignored, "error", r.GetError())
	return nil
}

// sendDesiredStates sends the desired impairment state of every device of
// the site that has one.
func (l *linkLoop) sendDesiredStates(ctx context.Context) error {
	states, err := l.s.store.DesiredStates(ctx, l.site)
	if err != nil {
		l.log.Error("load desired states", "err", err)
		return status.Error(codes.Unavailable, "hub could not read desired states; reconnect")
	}
	msg := &ironlinkv1.DesiredStates{}
	for _, d := range states {
		msg.Devices = append(msg.Devices, &ironlinkv1.DeviceDesiredState{DeviceId: d.DeviceID, Desired: impairmentToProto(d.Desired), Generation: d.Generation})
	}
	return l.stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_DesiredStates{DesiredStates: msg}})
}

func (l *linkLoop) handleCorrection(ctx context.Context, c *ironlinkv1.DriftCorrection) error {
	if l.id != nil && !l.id.HasScope(auth.ScopeDeviceUpdate) {
		return status.Errorf(codes.PermissionDenied, "client %s lacks scope %s needed to report corrections", l.id.ClientID, auth.ScopeDeviceUpdate)
	}
	did, err := uuid.Parse(c.GetDeviceId())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "drift correction: device_id %q is not a UUID", c.GetDeviceId())
	}
	now := time.Now()
	at := now
	if c.GetCorrectTime().IsValid() {
		var sk Skew
		at = sk.clamp(c.GetCorrectTime().AsTime(), now)
		l.noteSkew(sk)
	}
	err = l.s.store.RecordDriftCorrection(ctx, l.site, did.String(), c.GetGeneration(), truncate(c.GetDetail(), 1024), at)
	switch {
	case errors.Is(err, store.ErrWrongSite):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, store.ErrNotFound):
		l.log.Warn("correction for unknown device ignored", "device_id", did)
		return nil
	case err != nil:
		l.log.Error("record drift correction", "err", err)
		return status.Error(codes.Unavailable, "hub could not record the correction; reconnect and resend")
	}
	l.log.Info("drift corrected by the satellite", "device_id", did, "generation", c.GetGeneration(), "detail", c.GetDetail())
	return nil
}

func impairmentToProto(i store.Impairment) ironlinkv1.ImpairmentState {
	switch i {
	case store.ImpairmentQuarantined:
		return ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
	case store.ImpairmentReleased:
		return ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED
	}
	return ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED
}

// deliver sends the site's due commands; resend also repeats SENT ones (link start).
func (l *linkLoop) deliver(ctx context.Context, resend bool) error {
	cmds, err := l.s.store.DueCommands(ctx, l.site, l.epoch, l.s.cfg.Delivery, resend, 100)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		l.log.Warn("load due commands", "err", err)
		return nil // the next sweep tries again
	}
	for _, c := range cmds {
		desired := impairmentToProto(c.Desired)
		if err := l.stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Command{Command: &ironlinkv1.Command{
			CommandId: c.ID, DeviceId: c.DeviceID, Generation: c.Generation, Desired: desired, Reason: c.Reason, Actor: c.Actor,
			Redelivery: c.State == store.CommandSent,
		}}}); err != nil {
			return fmt.Errorf("send command %s: %w", c.ID, err)
		}
		l.s.cfg.Hooks.sent(l.site, c.ID, c.State == store.CommandSent)
		if err := l.s.store.MarkSent(ctx, c.ID); err != nil {
			l.log.Warn("mark command sent", "command_id", c.ID, "err", err)
		}
		l.log.Info("command sent", "command_id", c.ID, "device_id", c.DeviceID, "generation", c.Generation, "desired", c.Desired)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
