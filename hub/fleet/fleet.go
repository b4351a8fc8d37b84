// Package fleet serves the operator API (ironlink.v1.FleetService): device
// listings and details with histories, quarantine and release, commands and
// sites. It validates every request before touching the store, so bad input
// gets InvalidArgument (with a google.rpc.BadRequest naming the field, see
// hub/grpcerr) or NotFound and writes nothing; a listing filtered by a site
// or device that does not exist is NotFound, not an empty list. Error
// replies and log lines echo at most a prefix of the caller's input
// (textcheck.Quote). An operator whose roster entry lists sites sees only
// those (listings are filtered); naming another site's device, command or
// site is PermissionDenied, writes nothing and is logged as a refusal with
// the client id (sites.go).
package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/pagetoken"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/feed"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/wire"
)

// MaxReasonBytes is the longest quarantine/release reason accepted.
const MaxReasonBytes = 1024

// Source recorded for impairment changes made through this API.
const SourceOperatorAPI = "operator-api"

// ActorFunc names the caller of an RPC (the authenticated client id, or
// "anonymous" when authentication is off).
type ActorFunc func(ctx context.Context) string

// Server implements ironlinkv1.FleetServiceServer.
type Server struct {
	ironlinkv1.UnimplementedFleetServiceServer
	store Store
	// feed reads the change feed for WatchFleet (watch.go).
	feed  *feed.Reader
	actor ActorFunc
	log   *slog.Logger
	// profiles are the hardware profiles in force (hardware.go); nil: none.
	profiles func() *hwprofile.File
	// watchSendTimeout ends a WatchFleet stream whose consumer takes no
	// message for this long (watch.go).
	watchSendTimeout time.Duration
}

// NewServer returns a fleet server over st. actor may be nil ("anonymous").
func NewServer(st Store, actor ActorFunc, log *slog.Logger) *Server {
	if actor == nil {
		actor = func(context.Context) string { return "anonymous" }
	}
	return &Server{store: st, feed: feed.NewReader(st.Pool()), actor: actor, log: log, watchSendTimeout: DefaultWatchSendTimeout}
}

// parseID returns the canonical form of the UUID s in field (required).
func parseID(field, s string) (string, error) {
	if s == "" {
		return "", grpcerr.InvalidArgument(field, grpcerr.ReasonRequired, field+" is required")
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return "", grpcerr.InvalidArgument(field, grpcerr.ReasonNotUUID, field+" "+textcheck.Quote(s)+" is not a UUID")
	}
	return id.String(), nil
}

// checkSiteFilter refuses a site filter that cannot name a site.
func checkSiteFilter(site string) error {
	if site != "" && !sitename.Valid(site) {
		return grpcerr.InvalidArgument("site", grpcerr.ReasonInvalidValue, "site "+textcheck.Quote(site)+
			" is not a valid site name (lower-case letters, digits and '-', 1-63 bytes)")
	}
	return nil
}

// storeErr turns a store error into the status the caller sees
// (grpcerr.FromStore); a NotFound of the resource named name of
// resourceType also carries a ResourceInfo. A database failure is logged,
// and so is a value the database refused.
func (s *Server) storeErr(err error, resourceType, name string) error {
	gerr := grpcerr.FromStoreNamed(err, resourceType, name)
	if asOfRefusal(err) {
		return gerr
	}
	switch status.Code(gerr) {
	case codes.Unavailable:
		s.log.Error("store", "err", err)
	case codes.InvalidArgument:
		s.log.Warn("store refused a value", "err", textcheck.Prefix(err.Error(), 256))
	}
	return gerr
}

// checkExists answers NotFound when a listing came back empty for a site or
// device that does not exist (an empty list would look like a healthy empty
// site); it is called only for empty listings, so the common path costs no
// extra query.
func (s *Server) checkExists(ctx context.Context, site, deviceID string) error {
	if site != "" {
		ok, err := s.store.SiteExists(ctx, site)
		if err != nil {
			return s.storeErr(err, "", "")
		}
		if !ok {
			return grpcerr.UnknownSite(site)
		}
	}
	if deviceID != "" {
		ok, err := s.store.DeviceExists(ctx, deviceID)
		if err != nil {
			return s.storeErr(err, "", "")
		}
		if !ok {
			return grpcerr.NotFound("device", deviceID, "device "+deviceID+" not found")
		}
	}
	return nil
}

// listScope checks a list request's page size and site filter, and that
// the caller may see that site; it returns the page size and the caller's
// scope.
func (s *Server) listScope(ctx context.Context, pageSize int32, site string) (int, siteScope, error) {
	limit, err := grpcerr.PageSize(pageSize)
	if err != nil {
		return 0, siteScope{}, err
	}
	if err := checkSiteFilter(site); err != nil {
		return 0, siteScope{}, err
	}
	sc := callerScope(ctx)
	if err := s.checkSiteAllowed(ctx, sc, site); err != nil {
		return 0, siteScope{}, err
	}
	return limit, sc, nil
}

// ListDevices implements FleetService.ListDevices.
func (s *Server) ListDevices(ctx context.Context, req *ironlinkv1.ListDevicesRequest) (*ironlinkv1.ListDevicesResponse, error) {
	limit, sc, err := s.listScope(ctx, req.GetPageSize(), req.GetSite())
	if err != nil {
		return nil, err
	}
	f := store.DeviceFilter{Site: req.GetSite(), Sites: sc.Sites, IncludeRemoved: req.GetIncludeRemoved(), InstanceMismatch: req.GetInstanceMismatch(),
		HealthWarning: req.GetHealthWarning(), Limit: limit}
	if f.AsOf, err = parseAsOf(req.GetAsOf(), time.Now()); err != nil {
		return nil, err
	}
	if f.HealthWarning && !f.AsOf.IsZero() {
		return nil, grpcerr.InvalidArgument("health_warning", grpcerr.ReasonInvalidValue, "health_warning cannot be combined with as_of: warnings are read from the current conditions")
	}
	if f.NameLike, f.NameLike2, err = nameFilters(req.GetNamePrefix(), req.GetNamePattern()); err != nil {
		return nil, err
	}
	if f.Labels, err = labelFilter("labels", req.GetLabels(), f.AsOf); err != nil {
		return nil, err
	}
	if f.IDFrom, f.IDTo, err = idPrefixRange(req.GetIdPrefix()); err != nil {
		return nil, err
	}
	if f.IDFrom != "" && !f.AsOf.IsZero() {
		return nil, grpcerr.InvalidArgument("id_prefix", grpcerr.ReasonInvalidValue, "id_prefix cannot be combined with as_of: resolve the id first")
	}
	for i, im := range req.GetImpairments() {
		switch im {
		case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED:
			f.Impairments = append(f.Impairments, store.ImpairmentQuarantined)
		case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED:
			f.Impairments = append(f.Impairments, store.ImpairmentReleased)
		case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED:
			f.Impairments = append(f.Impairments, store.ImpairmentReleasedUnoffered)
		case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED:
			f.Impairments = append(f.Impairments, store.ImpairmentNone)
		default:
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("impairments[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("impairment %v is not a valid filter", im))
		}
	}
	for i, st := range req.GetStatuses() {
		hs, ok := statusFromProto(st)
		if !ok {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("statuses[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("status %v is not a valid filter", st))
		}
		f.Statuses = append(f.Statuses, hs)
	}
	if cur, err := pagetoken.Cursor(req, req.GetPageToken()); err != nil {
		return nil, err
	} else if cur != "" {
		id, err := uuid.Parse(cur)
		if err != nil {
			return nil, pagetoken.Malformed()
		}
		f.After = id.String()
	}
	devs, more, err := s.store.ListDevices(ctx, f)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	if len(devs) == 0 {
		if err := s.checkExists(ctx, f.Site, ""); err != nil {
			return nil, err
		}
	}
	resp := &ironlinkv1.ListDevicesResponse{}
	for _, d := range devs {
		resp.Devices = append(resp.Devices, deviceToProto(d))
	}
	if err := s.addStatusMessages(ctx, resp.Devices); err != nil {
		return nil, err
	}
	if more {
		resp.NextPageToken = pagetoken.Encode(req, devs[len(devs)-1].ID)
	}
	return resp, nil
}

// GetDevice implements FleetService.GetDevice.
func (s *Server) GetDevice(ctx context.Context, req *ironlinkv1.GetDeviceRequest) (*ironlinkv1.GetDeviceResponse, error) {
	if req.GetAsOf() != nil {
		return s.getDeviceAsOf(ctx, req)
	}
	var ops []store.Operation
	var runs []store.ValidationRun
	rd, err := s.readDevice(ctx, req, deviceReads{s.store.GetDevice, s.store.StatusHistory, s.store.ImpairmentHistory},
		func(g *errgroup.Group, ctx context.Context, rd deviceRead) {
			id, d, resp := rd.id, rd.dev, rd.resp
			g.Go(func() (err error) {
				if ops, err = s.store.RecentOperations(ctx, id, rd.limit); err != nil {
					return s.storeErr(err, "device", id)
				}
				return nil
			})
			g.Go(func() error { return s.explainDevice(ctx, d, resp) }) // status_message, explanation
			g.Go(func() error { return s.addHolds(ctx, id, resp) })     // quarantine_holds, release_plan
			g.Go(func() error { return s.addHardware(ctx, d, resp) })   // hardware, hardware_profile
			g.Go(func() (err error) {
				if runs, err = s.store.ValidationRuns(ctx, id, "", 5); err != nil {
					return s.storeErr(err, "device", id)
				}
				return nil
			})
		})
	if err != nil {
		return nil, err
	}
	resp := rd.resp
	for _, o := range ops {
		resp.RecentOperations = append(resp.RecentOperations, operations.ToProto(o))
	}
	resp.ValidationRuns = RunsToProto(runs)
	return resp, nil
}

// deviceReads are the store reads behind GetDevice: now, or as of a time.
type deviceReads struct {
	device            func(ctx context.Context, id string) (store.Device, error)
	statusHistory     func(ctx context.Context, id string, limit int) ([]store.StatusChange, error)
	impairmentHistory func(ctx context.Context, id string, limit int) ([]store.ImpairmentChange, error)
}

// deviceRead is what readDevice read: the device's id, the history limit
// in force, the device and the response built from it and its histories.
type deviceRead struct {
	id    string
	limit int
	dev   store.Device
	resp  *ironlinkv1.GetDeviceResponse
}

// deviceReadConns bounds the reads one GetDevice runs at once, each on a
// connection of the main pool (4 on a 2-core host by pgx's default), so
// that a burst of device pages leaves the pool to the group committer.
const deviceReadConns = 2

// readDevice is GetDevice's common part: it resolves the device, checks
// history_limit (0 means 50), reads the device through r, checks that the
// caller may see its site, then reads its status and impairment histories
// and whatever more adds to g, deviceReadConns at a time (each on its own pooled
// connection: at 1,000,000 devices on a loaded host the reads one after
// another cost a scheduling delay each, issue 26 item 4). The functions
// more starts each write their own fields of rd.resp and may read
// rd.resp.Device, which nothing changes meanwhile.
func (s *Server) readDevice(ctx context.Context, req *ironlinkv1.GetDeviceRequest, r deviceReads,
	more ...func(g *errgroup.Group, ctx context.Context, rd deviceRead)) (deviceRead, error) {
	id, err := s.resolveDevice(ctx, deviceRef{req.GetDeviceId(), req.GetDeviceName(), req.GetSite()})
	if err != nil {
		return deviceRead{}, err
	}
	limit := int(req.GetHistoryLimit())
	if limit < 0 || limit > 1000 {
		return deviceRead{}, grpcerr.InvalidArgument("history_limit", grpcerr.ReasonOutOfRange, fmt.Sprintf("history_limit %d is outside 0-1000 (0 means 50)", limit))
	}
	if limit == 0 {
		limit = 50
	}
	d, err := r.device(ctx, id)
	if err != nil {
		return deviceRead{}, s.storeErr(err, "device", id)
	}
	if sc := callerScope(ctx); !sc.Allows(d.Site) {
		return deviceRead{}, s.deny(ctx, sc, "device "+id, d.Site)
	}
	rd := deviceRead{id: id, limit: limit, dev: d, resp: &ironlinkv1.GetDeviceResponse{Device: deviceToProto(d)}}
	var sh []store.StatusChange
	var ih []store.ImpairmentChange
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deviceReadConns)
	g.Go(func() (err error) {
		if sh, err = r.statusHistory(gctx, id, limit); err != nil {
			return s.storeErr(err, "device", id)
		}
		return nil
	})
	g.Go(func() (err error) {
		if ih, err = r.impairmentHistory(gctx, id, limit); err != nil {
			return s.storeErr(err, "device", id)
		}
		return nil
	})
	for _, m := range more {
		m(g, gctx, rd)
	}
	if err := g.Wait(); err != nil {
		return deviceRead{}, err
	}
	addHistories(rd.resp, sh, ih)
	return rd, nil
}

// GetCommand implements FleetService.GetCommand.
func (s *Server) GetCommand(ctx context.Context, req *ironlinkv1.GetCommandRequest) (*ironlinkv1.GetCommandResponse, error) {
	id, err := parseID("command_id", req.GetCommandId())
	if err != nil {
		return nil, err
	}
	c, err := s.store.GetCommand(ctx, id)
	if err != nil {
		return nil, s.storeErr(err, "command", id)
	}
	if sc := callerScope(ctx); !sc.Allows(c.Site) {
		return nil, s.deny(ctx, sc, "command "+id, c.Site)
	}
	return &ironlinkv1.GetCommandResponse{Command: commandToProto(c)}, nil
}

// ListCommands implements FleetService.ListCommands.
func (s *Server) ListCommands(ctx context.Context, req *ironlinkv1.ListCommandsRequest) (*ironlinkv1.ListCommandsResponse, error) {
	limit, sc, err := s.listScope(ctx, req.GetPageSize(), req.GetSite())
	if err != nil {
		return nil, err
	}
	f := store.CommandFilter{Site: req.GetSite(), Sites: sc.Sites, Limit: limit}
	if rid := req.GetRequestId(); rid != "" { // a BulkService request (bulk.go)
		if f.RequestID, err = parseID("request_id", rid); err != nil {
			return nil, err
		}
	}
	if req.GetDeviceId() != "" || req.GetDeviceName() != "" {
		ref := deviceRef{id: req.GetDeviceId(), name: req.GetDeviceName()}
		if ref.name != "" {
			ref.site = req.GetSite() // with a UUID, site stays a plain filter
		}
		if f.DeviceID, err = s.resolveDevice(ctx, ref); err != nil {
			return nil, err
		}
		if err := s.checkDevice(ctx, sc, f.DeviceID); err != nil {
			return nil, err
		}
	}
	for i, st := range req.GetStates() {
		cs, ok := commandStateFromProto(st)
		if !ok {
			return nil, grpcerr.InvalidArgument(fmt.Sprintf("states[%d]", i), grpcerr.ReasonInvalidValue, fmt.Sprintf("state %v is not a valid filter", st))
		}
		f.States = append(f.States, cs)
	}
	if cur, err := pagetoken.Cursor(req, req.GetPageToken()); err != nil {
		return nil, err
	} else if cur != "" {
		off, err := strconv.Atoi(cur)
		if err != nil || off < 0 {
			return nil, pagetoken.Malformed()
		}
		f.Offset = off
	}
	cmds, more, err := s.store.ListCommands(ctx, f)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	if len(cmds) == 0 {
		if err := s.checkExists(ctx, f.Site, f.DeviceID); err != nil {
			return nil, err
		}
	}
	resp := &ironlinkv1.ListCommandsResponse{}
	for _, c := range cmds {
		resp.Commands = append(resp.Commands, commandToProto(c))
	}
	if more {
		resp.NextPageToken = pagetoken.Encode(req, strconv.Itoa(f.Offset+len(cmds)))
	}
	return resp, nil
}

// ListSites implements FleetService.ListSites.
func (s *Server) ListSites(ctx context.Context, _ *ironlinkv1.ListSitesRequest) (*ironlinkv1.ListSitesResponse, error) {
	sites, err := s.store.ListSites(ctx)
	if err != nil {
		return nil, s.storeErr(err, "", "")
	}
	resp := &ironlinkv1.ListSitesResponse{}
	sc := callerScope(ctx)
	for _, st := range sites {
		if !sc.Allows(st.Name) {
			continue
		}
		p := &ironlinkv1.Site{Name: st.Name, Replica: st.Replica, LastCommittedSequence: st.LastSequence,
			DeviceCount: int32(st.DeviceCount), SatelliteVersion: st.SatelliteVersion, Capabilities: st.Capabilities,
			InstanceMismatchCount: int32(st.InstanceMismatchCount), HealthWarningCount: int32(st.HealthWarningCount)}
		for _, c := range st.Conditions {
			p.Conditions = append(p.Conditions, wire.ConditionToProto(c))
		}
		switch {
		case st.Stale:
			p.LinkState = ironlinkv1.LinkState_LINK_STATE_UNREACHABLE
		case st.Connected:
			p.LinkState = ironlinkv1.LinkState_LINK_STATE_CONNECTED
		default:
			p.LinkState = ironlinkv1.LinkState_LINK_STATE_DISCONNECTED
		}
		if st.LastSeenAt != nil {
			p.LastSeenTime = timestamppb.New(*st.LastSeenAt)
		}
		resp.Sites = append(resp.Sites, p)
	}
	return resp, nil
}

// The store's enum-like strings are the proto enum names without their
// prefix; a value the enum does not have is UNSPECIFIED (see
// wire.EnumFromName).

func statusToProto(s hubstatus.Status) ironlinkv1.OperationalStatus {
	return wire.EnumFromName[ironlinkv1.OperationalStatus](s, ironlinkv1.OperationalStatus_value, "OPERATIONAL_STATUS_")
}

func statusFromProto(p ironlinkv1.OperationalStatus) (hubstatus.Status, bool) {
	s, ok := wire.EnumToName[hubstatus.Status](p, ironlinkv1.OperationalStatus_name, "OPERATIONAL_STATUS_")
	return s, ok && s.Valid()
}

func impairmentToProto(i store.Impairment) ironlinkv1.ImpairmentState {
	return wire.EnumFromName[ironlinkv1.ImpairmentState](i, ironlinkv1.ImpairmentState_value, "IMPAIRMENT_STATE_")
}

func failureClassToProto(f store.FailureClass) ironlinkv1.FailureClass {
	return wire.EnumFromName[ironlinkv1.FailureClass](f, ironlinkv1.FailureClass_value, "FAILURE_CLASS_")
}

func mismatchKindToProto(k store.MismatchKind) ironlinkv1.InstanceMismatchKind {
	return wire.EnumFromName[ironlinkv1.InstanceMismatchKind](k, ironlinkv1.InstanceMismatchKind_value, "INSTANCE_MISMATCH_KIND_")
}

func commandStateToProto(c store.CommandState) ironlinkv1.CommandState {
	return wire.EnumFromName[ironlinkv1.CommandState](c, ironlinkv1.CommandState_value, "COMMAND_STATE_")
}

func commandStateFromProto(p ironlinkv1.CommandState) (store.CommandState, bool) {
	return wire.EnumToName[store.CommandState](p, ironlinkv1.CommandState_name, "COMMAND_STATE_")
}

func deviceToProto(d store.Device) *ironlinkv1.Device {
	p := &ironlinkv1.Device{
		DeviceId: d.ID, Site: d.Site, Name: d.Name, Status: statusToProto(d.Status), StatusReason: d.StatusReason,
		StatusChangeTime: timestamppb.New(d.StatusChangedAt), LastKnownStatus: statusToProto(d.LastKnownStatus),
		Removed: d.Removed, DesiredImpairment: impairmentToProto(d.DesiredImpairment),
		DesiredGeneration: d.DesiredGeneration, AppliedGeneration: d.AppliedGeneration, LastCommandError: d.LastCommandError,
		LastCommandFailureClass: failureClassToProto(d.LastCommandFailureClass), LastCommandFailureReason: d.LastCommandFailureReason,
		Facts: &ironlinkv1.DeviceFacts{
			Name: d.Facts.Name, ProvisionState: d.Facts.ProvisionState, PowerState: d.Facts.PowerState,
			Maintenance: d.Facts.Maintenance, ResourceClass: d.Facts.ResourceClass, InstanceUuid: d.Facts.InstanceUUID,
			Lessee: d.Facts.Lessee, Owner: d.Facts.Owner, ConductorGroup: d.Facts.ConductorGroup, Fault: d.Facts.Fault,
			Cpus: d.Facts.CPUs, MemoryMb: d.Facts.MemoryMB, LocalGb: d.Facts.LocalGB, CpuArch: d.Facts.CPUArch,
			Labels: d.Facts.Labels,
		},
		Labels: d.Labels,
	}
	for _, m := range d.Facts.InstanceMismatches {
		p.Facts.InstanceMismatches = append(p.Facts.InstanceMismatches, &ironlinkv1.InstanceMismatch{
			Kind: mismatchKindToProto(m.Kind), IronicInstanceUuid: m.IronicInstanceUUID, NovaServerId: m.NovaServerID,
			NovaServerStatus: m.NovaServerStatus, NovaProjectId: m.NovaProjectID, FirstSeenTime: timestamppb.New(m.FirstSeenTime),
		})
	}
	if d.RemovedAt != nil {
		p.RemoveTime = timestamppb.New(*d.RemovedAt)
	}
	if d.ObservedAt != nil {
		p.ObservedTime = timestamppb.New(*d.ObservedAt)
	}
	p.DriftCorrections, p.LastDriftCorrection = d.DriftCorrections, d.LastDriftCorrection
	if d.LastDriftCorrectionAt != nil {
		p.LastDriftCorrectionTime = timestamppb.New(*d.LastDriftCorrectionAt)
	}
	for _, c := range d.Conditions {
		p.Conditions = append(p.Conditions, wire.ConditionToProto(c))
	}
	return p
}

func commandToProto(c store.Command) *ironlinkv1.OperatorCommand {
	p := &ironlinkv1.OperatorCommand{
		CommandId: c.ID, DeviceId: c.DeviceID, Site: c.Site, Generation: c.Generation,
		Desired: impairmentToProto(c.Desired), State: commandStateToProto(c.State),
		Actor: c.Actor, Reason: c.Reason, Source: c.Source, Attempts: int32(c.Attempts), LastError: c.LastError,
		ResultDetail: c.ResultDetail, CreateTime: timestamppb.New(c.CreatedAt), UpdateTime: timestamppb.New(c.UpdatedAt),
		FailureClass: failureClassToProto(c.FailureClass), FailureReason: c.FailureReason,
		Action: actionToProto(c.Action), Holder: c.Holder,
	}
	if c.CompletedAt != nil {
		p.CompleteTime = timestamppb.New(*c.CompletedAt)
	}
	return p
}

// addHistories adds d's status and impairment histories (newest first),
// as now or as of a past time, to GetDevice's answer resp.
func addHistories(resp *ironlinkv1.GetDeviceResponse, sh []store.StatusChange, ih []store.ImpairmentChange) {
	for _, c := range sh {
		resp.StatusHistory = append(resp.StatusHistory, &ironlinkv1.StatusChange{
			Status: statusToProto(c.Status), Reason: c.Reason, ChangeTime: timestamppb.New(c.ChangedAt)})
	}
	for _, c := range ih {
		resp.ImpairmentHistory = append(resp.ImpairmentHistory, &ironlinkv1.ImpairmentChange{
			Desired: impairmentToProto(c.Desired), Generation: c.Generation, Actor: c.Actor, Reason: c.Reason,
			Source: c.Source, ChangeTime: timestamppb.New(c.ChangedAt), CommandId: c.CommandID,
			Action: actionToProto(c.Action), Holder: c.Holder})
	}
}
