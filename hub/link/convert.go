package link

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
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

func impairmentToProto(i store.Impairment) ironlinkv1.ImpairmentState {
	switch i {
	case store.ImpairmentQuarantined:
		return ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
	case store.ImpairmentReleased:
		return ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED
	}
	return ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence
// (PostgreSQL refuses invalid UTF-8).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Limits on a Hello; more is refused with InvalidArgument before the link
// is recorded.
const (
	// MaxHelloTextBytes bounds boot_id and version, in bytes.
	MaxHelloTextBytes = 128
	// MaxCapabilities is the most capabilities a Hello may list.
	MaxCapabilities = 32
	// MaxCapabilityBytes bounds each capability, in bytes.
	MaxCapabilityBytes = 64
	// MaxAppliedGenerations is the most applied generations a Hello may list.
	MaxAppliedGenerations = 100000
)

// Limits on the free text of results and corrections: longer text is cut
// (at a UTF-8 boundary), not refused, so a long error still reaches the
// operator.
const (
	// MaxResultTextBytes bounds a CommandResult's error and detail, in bytes.
	MaxResultTextBytes = 2048
	// MaxCorrectionDetailBytes bounds a DriftCorrection's detail, in bytes.
	MaxCorrectionDetailBytes = 1024
)

// checkHello validates a Hello: a valid site name, boot_id and version of
// at most MaxHelloTextBytes, at most MaxCapabilities capabilities of at most
// MaxCapabilityBytes each, and at most MaxAppliedGenerations applied
// generations whose device ids are UUIDs. It returns those device ids in
// canonical form, for the site check. Errors are InvalidArgument statuses.
func checkHello(h *ironlinkv1.Hello) (appliedDevices []string, err error) {
	switch {
	case !sitename.Valid(h.GetSite()):
		return nil, status.Errorf(codes.InvalidArgument, "hello: site %q is not a valid site name ([a-z0-9-], 1-63 bytes)", truncate(h.GetSite(), 64))
	case len(h.GetBootId()) > MaxHelloTextBytes || len(h.GetVersion()) > MaxHelloTextBytes || len(h.GetCapabilities()) > MaxCapabilities:
		return nil, status.Error(codes.InvalidArgument, "hello: boot_id, version or capabilities too long")
	case len(h.GetAppliedGenerations()) > MaxAppliedGenerations:
		return nil, status.Errorf(codes.InvalidArgument, "hello: %d applied generations, at most %d", len(h.GetAppliedGenerations()), MaxAppliedGenerations)
	}
	for i, c := range h.GetCapabilities() {
		if len(c) > MaxCapabilityBytes {
			return nil, status.Errorf(codes.InvalidArgument, "hello: capability %d is %d bytes, limit %d", i, len(c), MaxCapabilityBytes)
		}
	}
	for i, g := range h.GetAppliedGenerations() {
		id, err := uuid.Parse(g.GetDeviceId())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "hello: applied generation %d: device_id %q is not a UUID", i, truncate(g.GetDeviceId(), 64))
		}
		appliedDevices = append(appliedDevices, id.String())
	}
	return appliedDevices, nil
}

// ToResult validates a wire CommandResult and converts it: command_id and
// device_id must be UUIDs (stored in canonical form); error and detail are
// cut to MaxResultTextBytes. Errors are InvalidArgument statuses.
func ToResult(r *ironlinkv1.CommandResult) (store.CommandResult, error) {
	cid, err1 := uuid.Parse(r.GetCommandId())
	did, err2 := uuid.Parse(r.GetDeviceId())
	if err1 != nil || err2 != nil {
		return store.CommandResult{}, status.Errorf(codes.InvalidArgument, "command result: command_id %q / device_id %q must be UUIDs",
			truncate(r.GetCommandId(), 64), truncate(r.GetDeviceId(), 64))
	}
	return store.CommandResult{
		CommandID: cid.String(), DeviceID: did.String(), Generation: r.GetGeneration(), Success: r.GetSuccess(),
		Error: truncate(r.GetError(), MaxResultTextBytes), Detail: truncate(r.GetDetail(), MaxResultTextBytes),
	}, nil
}

// Correction is a validated DriftCorrection.
type Correction struct {
	// DeviceID is the device's UUID in canonical form.
	DeviceID string
	// Generation is the desired-state generation the satellite re-applied.
	Generation int64
	// Detail is what differed, cut to MaxCorrectionDetailBytes.
	Detail string
	// At is when the correction was made: the satellite's correct_time,
	// or now when it is missing or invalid, clamped like batch times.
	At time.Time
}

// ToCorrection validates a wire DriftCorrection and converts it, with now
// as the hub's receive time for the clamp (see ClampBatch). Errors are
// InvalidArgument statuses.
func ToCorrection(c *ironlinkv1.DriftCorrection, now time.Time) (Correction, Skew, error) {
	did, err := uuid.Parse(c.GetDeviceId())
	if err != nil {
		return Correction{}, Skew{}, status.Errorf(codes.InvalidArgument, "drift correction: device_id %q is not a UUID", truncate(c.GetDeviceId(), 64))
	}
	var sk Skew
	at := now
	if c.GetCorrectTime().IsValid() {
		at = sk.clamp(c.GetCorrectTime().AsTime(), now)
	}
	return Correction{DeviceID: did.String(), Generation: c.GetGeneration(), Detail: truncate(c.GetDetail(), MaxCorrectionDetailBytes), At: at}, sk, nil
}
