// Package operations serves ironlink.v1.OperationService: the node
// lifecycle at a site (enrol, inspect, clean, provide, deploy/undeploy,
// Nova create/delete) asked for from the hub, stored as durable operations
// in PostgreSQL (hub/store) and delivered to the site's satellite by the
// link (hub/link). Every request is validated before the store is touched:
// bad input is InvalidArgument naming the field (hub/grpcerr) and stores
// nothing; guards (quarantine, a device already running an operation, a
// site without the "operations" capability, and each kind's preconditions
// against the hub's stored view of the device: provision state,
// maintenance, power, instance; see Preconditions) are FailedPrecondition; another site's device, for an
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
	"github.com/ironlink/ironlink/hub/novatemplate"
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
	// ReasonMaintenance: the kind cannot run on a node in maintenance
	// (Preconditions).
	ReasonMaintenance = "NODE_IN_MAINTENANCE"
	// ReasonPowerState: the node's power_state is "error" and the kind
	// needs a node Ironic can power (Preconditions).
	ReasonPowerState = "POWER_STATE"
	// ReasonInstancePresent: the kind needs a node without an instance and
	// the hub's view shows one: an instance_uuid (also a stale one Nova does
	// not know), an allocation, or a Nova server on the node (Preconditions).
	ReasonInstancePresent = "INSTANCE_PRESENT"
	// ReasonCustomerInstance: POWER_OFF, REBOOT or REPROVISION of a device
	// with CustomerAllocated True (a customer's instance would be
	// interrupted), without force.
	ReasonCustomerInstance = "CUSTOMER_INSTANCE"
)

// enrolTakeoverStates are the provision states in which an ENROL takes an
// existing node of its name over without force: the states an enrolment
// itself passes through (a redelivery, or the same rack file sent again).
// A node elsewhere (available, active, deploying, ...) is in use: adding
// ports and traits to it from a rack file is refused unless forced.
var enrolTakeoverStates = []string{"", "enroll", "verifying", "manageable"}

// AbortableStates are the Ironic provision states "abort" works from
// (docs/design/openstack.md §1.2): a RUNNING operation can be cancelled only there.
var AbortableStates = []string{"clean wait", "inspect wait", "deploy wait", "wait call-back", "rescue wait"}

// Abortable reports whether Ironic can abort from provision state ps.
func Abortable(ps string) bool { return slices.Contains(AbortableStates, ps) }

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
	// NovaTemplates is the --nova-templates-file in force (nil, or a nil
	// result: no templates; a NOVA_CREATE naming one is refused).
	NovaTemplates func() *novatemplate.File
	// ValidationCleanSteps returns the clean steps a VALIDATE of a device
	// (site, Ironic node name, resource class) uses when its request names
	// none: the hardware profile's validation.clean_steps (nil: none).
	ValidationCleanSteps func(site, name, resourceClass string) []*ironlinkv1.CleanStep
}

// Server implements ironlinkv1.OperationServiceServer.
type Server struct {
	ironlinkv1.UnimplementedOperationServiceServer
	store Store
	cfg   Config
	log   *slog.Logger
}

// NewServer returns an operation server over st.
func NewServer(st Store, cfg Config, log *slog.Logger) *Server {
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
// until a final state has been sent, or until the roster no longer lets
// the caller see the operation's site (PermissionDenied).
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
		// The roster may have narrowed the caller since the watch began
		// (authn.Streams re-scopes open streams on reload).
		if sc := callerScope(ctx); !sc.Allows(o.Site) {
			return sc.Deny(ctx, s.log, "operation "+o.ID, o.Site)
		}
	}
}
