package operations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/devref"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// The start path of OperationService: StartOperation, the checks of its
// targets (ENROL node specs, devices) and the guards each passes.

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

// resolve returns the device a target names: "UUID", "NAME", "SITE/UUID"
// or "SITE/NAME" (internal/devref), a name looked up within site (the
// request's site, or the reference's) among the caller's sites. Errors:
// InvalidArgument (a malformed reference or UUID, a site that disagrees with
// the request's, an ambiguous name), PermissionDenied (a site the caller may
// not use), NotFound (no such device at that site).
func (s *Server) resolve(ctx context.Context, sc siteScope, field, raw, site string) (string, error) {
	ref, err := devref.Parse(raw)
	if err != nil {
		reason := grpcerr.ReasonInvalidValue
		if de := (*devref.Error)(nil); errors.As(err, &de) && de.NotUUID {
			reason = grpcerr.ReasonNotUUID
		}
		return "", grpcerr.InvalidArgument(field, reason, fmt.Sprintf("%s %s: %v", field, textcheck.Quote(raw), err))
	}
	if ref.Site != "" {
		if site != "" && site != ref.Site {
			return "", grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, fmt.Sprintf("%s %s names site %q, but the request's site is %q", field, textcheck.Quote(raw), ref.Site, site))
		}
		if !sc.Allows(ref.Site) {
			return "", s.deny(ctx, sc, "site "+ref.Site, ref.Site)
		}
		site = ref.Site
	}
	if ref.ID != "" {
		if ref.Site != "" {
			d, err := s.store.GetDevice(ctx, ref.ID)
			if err != nil {
				return "", s.storeErr(err, "device", ref.ID)
			}
			if d.Site != ref.Site {
				if !sc.Allows(d.Site) {
					return "", s.deny(ctx, sc, "device "+ref.ID, d.Site)
				}
				return "", grpcerr.NotFound("device", ref.ID, fmt.Sprintf("%s: device %s is not at site %q (it is at %q)", field, ref.ID, ref.Site, d.Site))
			}
		}
		return ref.ID, nil
	}
	refs, err := s.store.DevicesByName(ctx, ref.Name, site)
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
			if ok, err := s.store.SiteExists(ctx, site); err == nil && !ok {
				return "", grpcerr.UnknownSite(site)
			}
			where = fmt.Sprintf(" at site %q", site)
		}
		return "", grpcerr.NotFound("device", ref.Name, fmt.Sprintf("%s: no device named %s%s", field, textcheck.Quote(ref.Name), where))
	}
	cands := make([]string, len(refs))
	for i, r := range refs {
		cands[i] = r.Site + "/" + r.ID
	}
	return "", grpcerr.InvalidArgument(field, ReasonDeviceNameAmbiguous, textcheck.Prefix(fmt.Sprintf("%s: device name %s is used by %d devices (%s): give SITE/NAME or the UUID",
		field, textcheck.Quote(ref.Name), len(refs), strings.Join(cands, ", ")), grpcerr.MaxMessageBytes))
}

// StartOperation implements OperationService.StartOperation: it checks the
// request, builds one operation per target (an ENROL's node specs, or the
// devices named) and stores them as one group.
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
	common := store.NewOperation{Kind: kind, Params: params, Actor: actor, Reason: reason, Source: source}
	caps := &capabilities{s: s, seen: map[string]bool{}}
	var ops []store.NewOperation
	secrets := map[string]map[string]string{}
	if kind == store.KindEnrol {
		ops, err = s.enrolOperations(ctx, sc, caps, req, common, secrets)
	} else {
		ops, err = s.deviceOperations(ctx, sc, caps, req, common)
	}
	if err != nil {
		return nil, err
	}
	return s.createOperations(ctx, ops, secrets, actor, reason)
}

// enrolOperations checks an ENROL's site and node specs and returns one
// operation per node (common holds the request-wide fields). The BMC
// credentials of a node are sealed for any replica when the hub has a
// key, else kept in secrets (by operation id) for this replica's vault.
func (s *Server) enrolOperations(ctx context.Context, sc siteScope, caps *capabilities, req *ironlinkv1.StartOperationRequest,
	common store.NewOperation, secrets map[string]map[string]string) ([]store.NewOperation, error) {
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
	var ops []store.NewOperation
	for i, n := range req.GetNodes() {
		forced, err := s.checkEnrolTarget(ctx, fmt.Sprintf("nodes[%d]", i), site, n.GetName(), req.GetForce())
		if err != nil {
			return nil, err
		}
		node, err := marshal(RedactNode(n))
		if err != nil { // validated above: cannot happen; no input echoed
			return nil, grpcerr.Internal("cannot encode the node spec")
		}
		op := common
		op.ID, op.Site, op.DeviceName, op.Node, op.Forced = uuid.NewString(), site, n.GetName(), node, forced
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
	return ops, nil
}

// deviceOperations resolves the devices a request names (each once) and
// returns one operation per device that passes the guards (common holds
// the request-wide fields).
func (s *Server) deviceOperations(ctx context.Context, sc siteScope, caps *capabilities, req *ironlinkv1.StartOperationRequest,
	common store.NewOperation) ([]store.NewOperation, error) {
	// A site the caller may not use, named outright, is refused (and
	// logged) before any name is looked up, as a site filter is.
	if site := req.GetSite(); site != "" && !sc.Allows(site) {
		return nil, s.deny(ctx, sc, "site "+site, site)
	}
	var ops []store.NewOperation
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
		op, rc, err := s.deviceOperation(ctx, sc, caps, field, id, req)
		if err != nil {
			return nil, err
		}
		op.Kind, op.Params, op.Actor, op.Reason, op.Source = common.Kind, common.Params, common.Actor, common.Reason, common.Source
		if op.Params, err = s.expandTemplate(op.Site, req.GetParams(), common.Params); err != nil {
			return nil, err
		}
		if op.Params, err = s.validationDefaults(op, rc, req); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// createOperations hands the ENROL credentials in secrets to the vault,
// stores ops as one group (dropping the credentials again when that
// fails), logs each operation and wakes each site's link once.
func (s *Server) createOperations(ctx context.Context, ops []store.NewOperation, secrets map[string]map[string]string, actor, reason string) (*ironlinkv1.StartOperationResponse, error) {
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

// view is the hub's view of d for the preconditions: an operation that
// finished after the last observation saw the node later. Without this,
// "provide, then deploy" is refused until the next poll reports the state
// the provide left the node in, and "nova-delete, then nova-create" until
// it reports the instance gone. A failed read keeps the observation.
func (s *Server) view(ctx context.Context, d store.Device) deviceView {
	v := deviceView{d: d, ps: d.Facts.ProvisionState}
	recent, err := s.store.RecentOperations(ctx, d.ID, 1)
	if err != nil || len(recent) != 1 {
		return v
	}
	if o := recent[0]; o.EndedAt != nil && o.ProvisionState != "" && (d.ObservedAt == nil || o.EndedAt.After(*d.ObservedAt)) {
		v.ps = o.ProvisionState
		v.instanceCleared = o.State == store.OperationSucceeded && (o.Kind == "NOVA_DELETE" || o.Kind == "UNDEPLOY")
	}
	return v
}

// validationDefaults returns op's params with the clean steps of the
// device's hardware profile (Config.ValidationCleanSteps) when op is a
// VALIDATE whose request names none; else op.Params as they are.
func (s *Server) validationDefaults(op store.NewOperation, resourceClass string, req *ironlinkv1.StartOperationRequest) ([]byte, error) {
	if req.GetKind() != ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE || len(req.GetParams().GetCleanSteps()) > 0 || s.cfg.ValidationCleanSteps == nil {
		return op.Params, nil
	}
	steps := s.cfg.ValidationCleanSteps(op.Site, op.DeviceName, resourceClass)
	if len(steps) == 0 {
		return op.Params, nil
	}
	p := &ironlinkv1.OperationParams{}
	if req.GetParams() != nil {
		p = proto.CloneOf(req.GetParams())
	}
	p.CleanSteps = steps
	b, err := marshal(p)
	if err != nil { // steps checked by the profiles file's parse: cannot happen
		return nil, grpcerr.Internal("cannot encode the operation's params")
	}
	return b, nil
}

// SetValidationCleanSteps gives the server the hardware profiles' validation
// clean steps (call before serving).
func (s *Server) SetValidationCleanSteps(f func(site, name, resourceClass string) []*ironlinkv1.CleanStep) {
	s.cfg.ValidationCleanSteps = f
}

// deviceOperation checks one device target against the guards and returns
// its operation (without the request-wide fields) and the device's
// resource class.
func (s *Server) deviceOperation(ctx context.Context, sc siteScope, caps *capabilities, field, id string, req *ironlinkv1.StartOperationRequest) (store.NewOperation, string, error) {
	kind := KindToStore(req.GetKind())
	d, err := s.store.GetDevice(ctx, id)
	if err != nil {
		return store.NewOperation{}, "", s.storeErr(err, "device", id)
	}
	if !sc.Allows(d.Site) {
		return store.NewOperation{}, "", s.deny(ctx, sc, "device "+id, d.Site)
	}
	if site := req.GetSite(); site != "" && site != d.Site {
		return store.NewOperation{}, "", grpcerr.InvalidArgument(field, grpcerr.ReasonInvalidValue, fmt.Sprintf("%s: device %s is at site %q, not %q", field, id, d.Site, site))
	}
	if d.Removed {
		return store.NewOperation{}, "", precondition(ReasonDeviceRemoved, fmt.Sprintf("%s: device %s was removed from Ironic", field, id))
	}
	forced, err := s.guards(ctx, caps, field, d, kind, req.GetForce(), req.GetParams().GetNovaCreate().GetForceClear(), true)
	if err != nil {
		return store.NewOperation{}, "", err
	}
	return store.NewOperation{ID: uuid.NewString(), Site: d.Site, DeviceID: id, DeviceName: d.Name, Forced: forced, ProvisionState: d.Facts.ProvisionState}, d.Facts.ResourceClass, nil
}

// guards checks device d (live, of a site the caller may use) against the
// guards an operation of kind passes: the site offers operations, the
// quarantine guard (when quarantineGuard), the customer-instance guard, one
// operation per device, and the precondition table. force overrides the
// quarantine and customer-instance guards (forced reports it did);
// forceClear is NOVA_CREATE's force_clear.
func (s *Server) guards(ctx context.Context, caps *capabilities, field string, d store.Device, kind store.OperationKind, force, forceClear, quarantineGuard bool) (forced bool, err error) {
	id := d.ID
	if err := caps.check(ctx, d.Site); err != nil {
		return false, err
	}
	if quarantineGuard && d.DesiredImpairment == store.ImpairmentQuarantined && Preconditions[kind].OffersToCustomers {
		if !force {
			return false, precondition(ReasonQuarantined, fmt.Sprintf("%s: device %s is quarantined; %s would offer it to customers (release it first, or set force, which is recorded)", field, id, kind))
		}
		forced = true
	}
	if Preconditions[kind].InterruptsCustomer {
		if who := customerInstance(d); who != "" {
			if !force {
				return false, precondition(ReasonCustomerInstance, fmt.Sprintf("%s: device %s %s; %s would interrupt it (set force to do it anyway, which is recorded)", field, id, who, kind))
			}
			forced = true
		}
	}
	if act, ok, err := s.store.ActiveOperation(ctx, id); err != nil {
		return false, s.storeErr(err, "", "")
	} else if ok {
		return false, precondition(ReasonOperationActive, fmt.Sprintf("%s: device %s is already running operation %s (%s, %s): wait for it or cancel it", field, id, act.ID, act.Kind, act.State))
	}
	v := s.view(ctx, d)
	v.forceClear = forceClear
	if err := checkPreconditions(field, kind, v); err != nil {
		return false, err
	}
	return forced, nil
}

// CheckStep checks an operation of kind on device id as StartOperation
// checks an operator's unforced request (docs/reference/policy.md
// "Remediation ladders"): the site offers operations, no customer instance
// (unless force: a ladder whose policy acts on customer instances), no
// other operation active, the precondition table on the hub's view of the
// device. The quarantine guard does not apply: a ladder
// acts on the device its rule holds quarantined, and the hold stays until
// the ladder releases it. A refusal is reason (the ErrorInfo reason
// StartOperation would answer, e.g. PROVISION_STATE) and msg; err is a
// failure to read the store.
func (s *Server) CheckStep(ctx context.Context, id string, kind store.OperationKind, force bool) (reason, msg string, err error) {
	d, err := s.store.GetDevice(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return grpcerr.ReasonNotFound, "device " + id + " is not known", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("check step %s on %s: %w", kind, id, err)
	}
	if d.Removed {
		return ReasonDeviceRemoved, fmt.Sprintf("device %s was removed from Ironic", id), nil
	}
	caps := &capabilities{s: s, seen: map[string]bool{}}
	_, gerr := s.guards(ctx, caps, "device", d, kind, force, false, false)
	if gerr == nil {
		return "", "", nil
	}
	st := status.Convert(gerr)
	if st.Code() == codes.Unavailable || st.Code() == codes.Internal {
		return "", "", fmt.Errorf("check step %s on %s: %w", kind, id, gerr)
	}
	return cmp.Or(grpcerr.Reason(gerr), st.Code().String()), st.Message(), nil
}
