// Package operations serves ironlink.v1.OperationService: the node
// lifecycle at a site (enrol, inspect, clean, provide, deploy/undeploy,
// Nova create/delete) asked for from the hub, stored as durable operations
// in PostgreSQL (hub/store) and delivered to the site's satellite by the
// link (hub/link). Every request is validated before the store is touched:
// bad input is InvalidArgument naming the field (hub/grpcerr) and stores
// nothing; guards (quarantine, a device already running an operation, a
// site without the "operations" capability, a provision state the kind
// cannot start from) are FailedPrecondition; another site's device, for an
// operator bound to sites, is PermissionDenied. BMC credentials of ENROL
// are kept in memory only (package vault).
package operations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/pagetoken"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Capability is the Hello capability a satellite announces when it runs
// operations; the hub delivers operations only to such links.
const Capability = "operations"

// ErrorInfo reasons (domain grpcerr.Domain) of the FailedPrecondition
// answers; clients may switch on them.
const (
	// ReasonQuarantined: PROVIDE, DEPLOY or NOVA_CREATE on a quarantined device without force.
	ReasonQuarantined = "DEVICE_QUARANTINED"
	// ReasonOperationActive: the device already has a PENDING or RUNNING operation.
	ReasonOperationActive = grpcerr.ReasonOperationActive
	// ReasonNoOperations: the site's satellite did not announce the "operations" capability.
	ReasonNoOperations = "SITE_WITHOUT_OPERATIONS"
	// ReasonProvisionState: the node's last reported provision state is not one the kind starts from.
	ReasonProvisionState = "PROVISION_STATE"
	// ReasonDeviceRemoved: the device vanished from Ironic.
	ReasonDeviceRemoved = "DEVICE_REMOVED"
	// ReasonOperationFinished: cancel of a finished operation.
	ReasonOperationFinished = grpcerr.ReasonOperationFinished
	// ReasonNotAbortable: cancel of a RUNNING operation whose node is not in a "* wait" state.
	ReasonNotAbortable = grpcerr.ReasonNotAbortable
	// ReasonDeviceNameAmbiguous: a device name several devices share (as hub/fleet's).
	ReasonDeviceNameAmbiguous = grpcerr.ReasonDeviceNameAmbiguous
	// ReasonVaultFull: too many ENROL credentials held in memory; retry later.
	ReasonVaultFull = "CREDENTIALS_STORE_FULL"
	// ReasonNodeInUse: an ENROL names a node the site already has in a
	// provision state past manageable (available, active, ...), without force.
	ReasonNodeInUse = "NODE_IN_USE"
)

// enrolTakeoverStates are the provision states in which an ENROL takes an
// existing node of its name over without force: the states an enrolment
// itself passes through (a redelivery, or the same rack file sent again).
// A node elsewhere (available, active, deploying, ...) is in use: adding
// ports and traits to it from a rack file is refused unless forced.
var enrolTakeoverStates = []string{"", "enroll", "verifying", "manageable"}

// AbortableStates are the Ironic provision states "abort" works from
// (OPENSTACK.md §1.2): a RUNNING operation can be cancelled only there.
var AbortableStates = []string{"clean wait", "inspect wait", "deploy wait", "wait call-back", "rescue wait"}

// Abortable reports whether Ironic can abort from provision state ps.
func Abortable(ps string) bool { return slices.Contains(AbortableStates, ps) }

// startStates are the provision states, as last reported, each kind may
// start from (its goal state too: the reconcile then just confirms it). A
// device whose state was never reported is not refused.
var startStates = map[store.OperationKind][]string{
	"INSPECT":     {"manageable", "inspect failed"},
	"CLEAN":       {"manageable", "clean failed"},
	"PROVIDE":     {"manageable", "available", "clean failed"},
	"DEPLOY":      {"available", "deploy failed", "active"},
	"UNDEPLOY":    {"active", "deploy failed", "error", "available"},
	"NOVA_CREATE": {"available", "active"},
	"NOVA_DELETE": {"active", "deploy failed", "error", "available"},
}

// offersToCustomers are the kinds a quarantine guards against.
var offersToCustomers = []store.OperationKind{"PROVIDE", "DEPLOY", "NOVA_CREATE"}

// ActorFunc names the caller of an RPC.
type ActorFunc func(ctx context.Context) string

// Config wires a Server.
type Config struct {
	// Vault keeps ENROL credentials (in memory, or sealed into the
	// operation row: the vault package doc); shared with the link server of
	// the same process (required).
	Vault *vault.Vault
	// Actor names the caller (nil: "anonymous").
	Actor ActorFunc
	// Wake tells this replica's link of a site to deliver now (optional;
	// the NOTIFY hint and the sweep do it anyway).
	Wake func(site string)
	// Changes wakes WatchOperation streams (nil: a new one, woken by polls only).
	Changes *Notifier
	// Poll is WatchOperation's poll interval (default 1 s).
	Poll time.Duration
}

// Server implements ironlinkv1.OperationServiceServer.
type Server struct {
	ironlinkv1.UnimplementedOperationServiceServer
	store *store.Store
	cfg   Config
	log   *slog.Logger
}

// NewServer returns an operation server over st.
func NewServer(st *store.Store, cfg Config, log *slog.Logger) *Server {
	if cfg.Actor == nil {
		cfg.Actor = func(context.Context) string { return "anonymous" }
	}
	if cfg.Changes == nil {
		cfg.Changes = NewNotifier()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Vault == nil {
		cfg.Vault = vault.New("local", 0)
	}
	return &Server{store: st, cfg: cfg, log: log}
}

// Changes returns the notifier the server's watches listen on.
func (s *Server) Changes() *Notifier { return s.cfg.Changes }

// siteScope is the caller's sites (authn.SiteScope, as hub/fleet's).
type siteScope = authn.SiteScope

func callerScope(ctx context.Context) siteScope { return authn.CallerScope(ctx) }

// deny logs the refusal and returns PermissionDenied; the object's site is
// logged, never told.
func (s *Server) deny(ctx context.Context, sc siteScope, what, site string) error {
	return sc.Deny(ctx, s.log, what, site)
}

// storeErr turns a store error into the status the caller sees
// (grpcerr.FromStoreNamed: a NotFound of the resource named name of
// resourceType carries a ResourceInfo when resourceType is set). A refused
// cancel says which states Ironic aborts from. A database failure is
// logged.
func (s *Server) storeErr(err error, resourceType, name string) error {
	if errors.Is(err, store.ErrNotCancellable) {
		err = fmt.Errorf("%w; Ironic can abort only from %s", err, strings.Join(AbortableStates, ", "))
	}
	gerr := grpcerr.FromStoreNamed(err, resourceType, name)
	if status.Code(gerr) == codes.Unavailable {
		s.log.Error("store", "err", err)
	}
	return gerr
}

func precondition(reason, msg string) error {
	return grpcerr.FailedPrecondition(reason, msg)
}

func sourceAddress(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// parseID returns the canonical UUID in field.
func parseID(field, v string) (string, error) {
	if v == "" {
		return "", grpcerr.InvalidArgument(field, grpcerr.ReasonRequired, field+" is required")
	}
	id, err := uuid.Parse(v)
	if err != nil {
		return "", grpcerr.InvalidArgument(field, grpcerr.ReasonNotUUID, field+" "+textcheck.Quote(v)+" is not a UUID")
	}
	return id.String(), nil
}

// capabilities caches per request which sites offer operations.
type capabilities struct {
	s    *Server
	seen map[string]bool
}

// check answers FailedPrecondition for a site whose satellite did not
// announce Capability in its last hello (or never linked).
func (c *capabilities) check(ctx context.Context, site string) error {
	ok, known := c.seen[site]
	if !known {
		caps, err := c.s.store.SiteCapabilities(ctx, site)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return grpcerr.UnknownSite(site)
		case err != nil:
			return c.s.storeErr(err, "", "")
		}
		ok = slices.Contains(caps, Capability)
		c.seen[site] = ok
	}
	if !ok {
		return precondition(ReasonNoOperations, fmt.Sprintf("site %q: its satellite does not offer the %q capability (no operations credential configured, or an older satellite)", site, Capability))
	}
	return nil
}

// resolve returns the device a target names: a UUID, or a name (within
// site when given) among the caller's sites.
func (s *Server) resolve(ctx context.Context, sc siteScope, field, ref, site string) (string, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return id.String(), nil
	}
	refs, err := s.store.DevicesByName(ctx, ref, site)
	if err != nil {
		return "", s.storeErr(err, "", "")
	}
	refs = slices.DeleteFunc(refs, func(r store.DeviceRef) bool { return !sc.Allows(r.Site) })
	switch len(refs) {
	case 1:
		return refs[0].ID, nil
	case 0:
		where := ""
		if site != "" {
			where = fmt.Sprintf(" at site %q", site)
		}
		return "", grpcerr.NotFound("device", ref, fmt.Sprintf("%s: no device named %s%s", field, textcheck.Quote(ref), where))
	}
	cands := make([]string, len(refs))
	for i, r := range refs {
		cands[i] = r.Site + "/" + r.ID
	}
	return "", grpcerr.InvalidArgument(field, ReasonDeviceNameAmbiguous, textcheck.Prefix(fmt.Sprintf("%s: device name %s is used by %d devices (%s): give the site or the UUID",
		field, textcheck.Quote(ref), len(refs), strings.Join(cands, ", ")), grpcerr.MaxMessageBytes))
}

// StartOperation implements OperationService.StartOperation.
func (s *Server) StartOperation(ctx context.Context, req *ironlinkv1.StartOperationRequest) (*ironlinkv1.StartOperationResponse, error) {
	reason, err := checkShape(req)
	if err != nil {
		return nil, err
	}
	sc := callerScope(ctx)
	kind := KindToStore(req.GetKind())
	params, err := marshal(req.GetParams())
	if err != nil { // validated above: cannot happen; no input echoed
		return nil, grpcerr.Internal("cannot encode the operation's params")
	}
	actor, source := s.cfg.Actor(ctx), sourceAddress(ctx)
	caps := &capabilities{s: s, seen: map[string]bool{}}
	var ops []store.NewOperation
	secrets := map[string]map[string]string{}
	if kind == store.KindEnrol {
		site := req.GetSite()
		if !sc.Allows(site) {
			return nil, s.deny(ctx, sc, "site "+site, site)
		}
		if err := caps.check(ctx, site); err != nil {
			return nil, err
		}
		sealer := s.cfg.Vault.Sealer()
		if sealer == nil && !s.cfg.Vault.Room(len(req.GetNodes())) {
			return nil, grpcerr.ResourceExhausted(ReasonVaultFull, "too many enrolments wait for delivery on this hub replica; retry later")
		}
		for i, n := range req.GetNodes() {
			forced, err := s.checkEnrolTarget(ctx, fmt.Sprintf("nodes[%d]", i), site, n.GetName(), req.GetForce())
			if err != nil {
				return nil, err
			}
			node, err := marshal(RedactNode(n))
			if err != nil { // validated above: cannot happen; no input echoed
				return nil, grpcerr.Internal("cannot encode the node spec")
			}
			op := store.NewOperation{ID: uuid.NewString(), Site: site, DeviceName: n.GetName(), Kind: kind, Node: node, Params: params,
				Actor: actor, Reason: reason, Source: source, Forced: forced}
			switch {
			case len(n.GetDriverInfo()) == 0:
			case sealer != nil: // any replica with the key delivers it
				if op.SealedDriverInfo, err = sealer.Seal(op.ID, n.GetDriverInfo()); err != nil {
					s.log.Error("seal driver_info", "err", err)
					return nil, grpcerr.Internal("cannot seal the BMC credentials")
				}
				op.SecretHolder = sealer.Holder()
			default: // in this process's memory until delivered
				op.SecretHolder = s.cfg.Vault.Holder()
				secrets[op.ID] = n.GetDriverInfo()
			}
			ops = append(ops, op)
		}
	} else {
		// A site the caller may not use, named outright, is refused (and
		// logged) before any name is looked up, as a site filter is.
		if site := req.GetSite(); site != "" && !sc.Allows(site) {
			return nil, s.deny(ctx, sc, "site "+site, site)
		}
		seen := map[string]int{}
		for i, ref := range req.GetDevices() {
			field := fmt.Sprintf("devices[%d]", i)
			id, err := s.resolve(ctx, sc, field, ref, req.GetSite())
			if err != nil {
				return nil, err
			}
			if j, dup := seen[id]; dup {
				return nil, grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, fmt.Sprintf("%s names device %s, as devices[%d] does", field, id, j))
			}
			seen[id] = i
			op, err := s.deviceOperation(ctx, sc, caps, field, id, req)
			if err != nil {
				return nil, err
			}
			op.Kind, op.Params, op.Actor, op.Reason, op.Source = kind, params, actor, reason, source
			ops = append(ops, op)
		}
	}
	for id, info := range secrets {
		s.cfg.Vault.Put(id, info)
	}
	group, stored, err := s.store.CreateOperations(ctx, ops)
	if err != nil {
		for id := range secrets {
			s.cfg.Vault.Drop(id)
		}
		return nil, s.storeErr(err, "", "")
	}
	resp := &ironlinkv1.StartOperationResponse{GroupId: group}
	woken := map[string]bool{}
	for _, o := range stored {
		resp.Operations = append(resp.Operations, ToProto(o))
		s.log.Info("operation requested", "operation_id", o.ID, "group_id", group, "kind", o.Kind, "site", o.Site,
			"device_id", o.DeviceID, "device_name", o.DeviceName, "actor", actor, "reason", reason, "forced", o.Forced)
		if s.cfg.Wake != nil && !woken[o.Site] {
			woken[o.Site] = true
			s.cfg.Wake(o.Site)
		}
	}
	return resp, nil
}

// checkEnrolTarget refuses an ENROL of name at site when the site already
// has a live device of that name in a provision state past manageable (it
// is in use: FailedPrecondition NODE_IN_USE naming the device and its
// state), unless force; forced reports that force overrode it (recorded).
// A name the hub does not know yet, or a node still being enrolled, passes:
// the satellite takes such a node over by name.
func (s *Server) checkEnrolTarget(ctx context.Context, field, site, name string, force bool) (forced bool, err error) {
	refs, err := s.store.DevicesByName(ctx, name, site)
	if err != nil {
		return false, s.storeErr(err, "", "")
	}
	for _, r := range refs {
		ps := r.ProvisionState
		if r.Removed || slices.Contains(enrolTakeoverStates, ps) {
			continue
		}
		if !force {
			return false, precondition(ReasonNodeInUse, fmt.Sprintf("%s: site %s already has a node named %s (device %s, %s): an ENROL takes over only a node in enroll, verifying or manageable; "+
				"check the name, or set force to add its ports and traits to that node (recorded)", field, site, textcheck.Quote(name), r.ID, ps))
		}
		forced = true
	}
	return forced, nil
}

// deviceOperation checks one device target against the guards and returns
// its operation (without the request-wide fields).
func (s *Server) deviceOperation(ctx context.Context, sc siteScope, caps *capabilities, field, id string, req *ironlinkv1.StartOperationRequest) (store.NewOperation, error) {
	kind := KindToStore(req.GetKind())
	d, err := s.store.GetDevice(ctx, id)
	if err != nil {
		return store.NewOperation{}, s.storeErr(err, "device", id)
	}
	if !sc.Allows(d.Site) {
		return store.NewOperation{}, s.deny(ctx, sc, "device "+id, d.Site)
	}
	if site := req.GetSite(); site != "" && site != d.Site {
		return store.NewOperation{}, grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, fmt.Sprintf("%s: device %s is at site %q, not %q", field, id, d.Site, site))
	}
	if d.Removed {
		return store.NewOperation{}, precondition(ReasonDeviceRemoved, fmt.Sprintf("%s: device %s was removed from Ironic", field, id))
	}
	if err := caps.check(ctx, d.Site); err != nil {
		return store.NewOperation{}, err
	}
	forced := false
	if d.DesiredImpairment == store.ImpairmentQuarantined && slices.Contains(offersToCustomers, kind) {
		if !req.GetForce() {
			return store.NewOperation{}, precondition(ReasonQuarantined, fmt.Sprintf("%s: device %s is quarantined; %s would offer it to customers (release it first, or set force, which is recorded)", field, id, kind))
		}
		forced = true
	}
	ps := d.Facts.ProvisionState
	// An operation that finished after the last observation saw the node
	// later: without this, "provide, then deploy" is refused until the
	// next poll reports the state the provide left the node in.
	if recent, err := s.store.RecentOperations(ctx, id, 1); err == nil && len(recent) == 1 {
		if o := recent[0]; o.EndedAt != nil && o.ProvisionState != "" && (d.ObservedAt == nil || o.EndedAt.After(*d.ObservedAt)) {
			ps = o.ProvisionState
		}
	}
	if ps != "" && !slices.Contains(startStates[kind], ps) {
		return store.NewOperation{}, precondition(ReasonProvisionState, fmt.Sprintf("%s: device %s is %q; %s starts from %s", field, id, ps, kind, strings.Join(startStates[kind], ", ")))
	}
	if act, ok, err := s.store.ActiveOperation(ctx, id); err != nil {
		return store.NewOperation{}, s.storeErr(err, "", "")
	} else if ok {
		return store.NewOperation{}, precondition(ReasonOperationActive, fmt.Sprintf("%s: device %s is already running operation %s (%s, %s): wait for it or cancel it", field, id, act.ID, act.Kind, act.State))
	}
	return store.NewOperation{ID: uuid.NewString(), Site: d.Site, DeviceID: id, DeviceName: d.Name, Forced: forced, ProvisionState: d.Facts.ProvisionState}, nil
}

// get loads operation id (field operation_id) for the caller.
func (s *Server) get(ctx context.Context, raw string) (store.Operation, error) {
	id, err := parseID("operation_id", raw)
	if err != nil {
		return store.Operation{}, err
	}
	o, err := s.store.GetOperation(ctx, id)
	if err != nil {
		return store.Operation{}, s.storeErr(err, "operation", id)
	}
	if sc := callerScope(ctx); !sc.Allows(o.Site) {
		return store.Operation{}, s.deny(ctx, sc, "operation "+id, o.Site)
	}
	return o, nil
}

// GetOperation implements OperationService.GetOperation.
func (s *Server) GetOperation(ctx context.Context, req *ironlinkv1.GetOperationRequest) (*ironlinkv1.GetOperationResponse, error) {
	o, err := s.get(ctx, req.GetOperationId())
	if err != nil {
		return nil, err
	}
	return &ironlinkv1.GetOperationResponse{Operation: ToProto(o)}, nil
}

// ListOperations implements OperationService.ListOperations.
func (s *Server) ListOperations(ctx context.Context, req *ironlinkv1.ListOperationsRequest) (*ironlinkv1.ListOperationsResponse, error) {
	n, err := grpcerr.PageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	f := store.OperationFilter{Limit: n + 1}
	sc := callerScope(ctx)
	if site := req.GetSite(); site != "" {
		if !sitename.Valid(site) {
			return nil, grpcerr.InvalidArgument("site", grpcerr.ReasonInvalidValue, "site "+textcheck.Quote(site)+" is not a valid site name")
		}
		if !sc.Allows(site) {
			return nil, s.deny(ctx, sc, "site "+site, site)
		}
		f.Sites = []string{site}
	} else if sc.Bound() {
		f.Sites = append([]string{}, sc.Sites...)
	}
	for i, k := range req.GetKinds() {
		sk := KindToStore(k)
		if sk == "" {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("kinds[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("kinds[%d]: %d is not an operation kind", i, k))
		}
		f.Kinds = append(f.Kinds, sk)
	}
	for i, st := range req.GetStates() {
		ss := StateToStore(st)
		if ss == "" {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("states[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("states[%d]: %d is not an operation state", i, st))
		}
		f.States = append(f.States, ss)
	}
	if g := req.GetGroupId(); g != "" {
		id, err := parseID("group_id", g)
		if err != nil {
			return nil, err
		}
		f.GroupID = id
	}
	if d := req.GetDevice(); d != "" {
		if err := textcheck.Line("device", d, 255); err != nil {
			return nil, grpcerr.FromCheck(err)
		}
		id, err := s.resolve(ctx, sc, "device", d, req.GetSite())
		if err != nil {
			return nil, err
		}
		f.DeviceID = id
	}
	if cur, err := pagetoken.Cursor(req, req.GetPageToken()); err != nil {
		return nil, err
	} else if cur != "" {
		t, id, err := decodeCursor(cur)
		if err != nil {
			return nil, err
		}
		f.AfterTime, f.AfterID = t, id
	}
	ops, err := s.store.ListOperations(ctx, f)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	if len(ops) == 0 { // a typo in the site is NotFound, also with a page token
		if err := grpcerr.SiteKnown(ctx, s.store, req.GetSite()); err != nil {
			return nil, err
		}
	}
	resp := &ironlinkv1.ListOperationsResponse{}
	if len(ops) > int(n) {
		ops = ops[:n]
		last := ops[len(ops)-1]
		resp.NextPageToken = pagetoken.Encode(req, last.CreatedAt.UTC().Format(time.RFC3339Nano)+"|"+last.ID)
	}
	for _, o := range ops {
		resp.Operations = append(resp.Operations, ToProto(o))
	}
	return resp, nil
}

// decodeCursor is the created_at|id position of a ListOperations page token.
func decodeCursor(cur string) (time.Time, string, error) {
	badTok := pagetoken.Malformed()
	ts, id, ok := strings.Cut(cur, "|")
	if !ok {
		return time.Time{}, "", badTok
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, "", badTok
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return time.Time{}, "", badTok
	}
	return t, u.String(), nil
}

// CancelOperation implements OperationService.CancelOperation.
func (s *Server) CancelOperation(ctx context.Context, req *ironlinkv1.CancelOperationRequest) (*ironlinkv1.CancelOperationResponse, error) {
	id, err := parseID("operation_id", req.GetOperationId())
	if err != nil {
		return nil, err
	}
	reason, err := checkReason(req.GetReason())
	if err != nil {
		return nil, err
	}
	if _, err := s.get(ctx, id); err != nil {
		return nil, err
	}
	actor := s.cfg.Actor(ctx)
	o, err := s.store.CancelOperation(ctx, id, actor, reason, Abortable)
	if err != nil {
		return nil, s.storeErr(err, "operation", id)
	}
	if o.State.Final() {
		s.cfg.Vault.Drop(o.ID)
	} else if s.cfg.Wake != nil {
		s.cfg.Wake(o.Site)
	}
	s.log.Info("operation cancel requested", "operation_id", id, "state", o.State, "cancel_requested", o.CancelRequested,
		"provision_state", o.ProvisionState, "actor", actor, "reason", reason)
	return &ironlinkv1.CancelOperationResponse{Operation: ToProto(o)}, nil
}

// WatchOperation implements OperationService.WatchOperation: the operation
// now, then after every change (woken by OperationsChannel notifications
// through the Notifier, and by a poll every Config.Poll as the guarantee)
// until a final state has been sent.
func (s *Server) WatchOperation(req *ironlinkv1.WatchOperationRequest, stream ironlinkv1.OperationService_WatchOperationServer) error {
	ctx := stream.Context()
	o, err := s.get(ctx, req.GetOperationId())
	if err != nil {
		return err
	}
	wake, stop := s.cfg.Changes.Subscribe(o.ID)
	defer stop()
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	var last time.Time
	var lastState store.OperationState
	for {
		if !o.UpdatedAt.Equal(last) || o.State != lastState {
			if err := stream.Send(&ironlinkv1.WatchOperationResponse{Operation: ToProto(o)}); err != nil {
				return err
			}
			last, lastState = o.UpdatedAt, o.State
		}
		if o.State.Final() {
			return nil
		}
		select {
		case <-ctx.Done():
			return grpcerr.FromContext(ctx.Err())
		case <-wake:
		case <-t.C:
		}
		if o, err = s.store.GetOperation(ctx, o.ID); err != nil {
			return s.storeErr(err, "operation", req.GetOperationId())
		}
	}
}
