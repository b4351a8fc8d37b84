package link

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
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

// MaxFactBytes bounds each text field of a device's facts (name,
// provision_state, power_state, resource_class, instance_uuid, lessee,
// owner, conductor_group, fault), in bytes.
const MaxFactBytes = 255

// MaxSnapshotIDBytes bounds a snapshot id, in bytes.
const MaxSnapshotIDBytes = 64

// maxTypeBytes bounds a condition type before it is looked up (and echoed).
const maxTypeBytes = 64

// invalid is InvalidArgument for field, its message prefixed by where (the
// message it is in, e.g. "batch 7").
func invalid(where, field, reason, format string, args ...any) error {
	return grpcerr.InvalidArgument(field, reason, where+": "+fmt.Sprintf(format, args...))
}

// textErr turns a textcheck error into InvalidArgument for its field,
// prefixed by where; nil stays nil.
func textErr(where string, err error) error {
	var te *textcheck.Error
	if !errors.As(err, &te) {
		return err
	}
	return grpcerr.InvalidArgument(te.Field, te.Reason, where+": "+te.Error())
}

// parseUUID parses an id field, refusing anything but a UUID; it returns
// the canonical form.
func parseUUID(where, field, v string) (string, error) {
	id, err := uuid.Parse(v)
	if err != nil {
		return "", invalid(where, field, grpcerr.ReasonNotUUID, "%s %s is not a UUID", field, textcheck.Quote(v))
	}
	return id.String(), nil
}

// toCondition validates one wire condition at field (site says which types
// are allowed) and converts it: a one-line type, a message of valid text,
// and what condition.Condition.Validate checks (the reason is one CamelCase
// word, which admits no control character).
func toCondition(where, field string, pc *ironlinkv1.Condition, site bool) (condition.Condition, error) {
	if err := textcheck.Line(field+".type", pc.GetType(), maxTypeBytes); err != nil {
		return condition.Condition{}, textErr(where, err)
	}
	if err := textcheck.Text(field+".message", pc.GetMessage(), condition.MaxMessageBytes); err != nil {
		return condition.Condition{}, textErr(where, err)
	}
	from := wire.ConditionFromProto
	if site {
		from = wire.SiteConditionFromProto
	}
	c, err := from(pc)
	if err != nil {
		return condition.Condition{}, invalid(where, field, grpcerr.ReasonInvalidValue, "%v", err)
	}
	return c, nil
}

// ToBatch validates a wire batch and converts it. Errors are gRPC statuses
// (hub/grpcerr, with the field's proto path in a BadRequest detail):
// InvalidArgument for malformed content (ids not UUIDs, text too long, not
// UTF-8 or with control characters, invalid conditions or times),
// ResourceExhausted for more than MaxDevicesPerBatch devices. Echoed input
// is cut (textcheck.Quote).
func ToBatch(b *ironlinkv1.ConditionBatch) (store.Batch, error) {
	if b.GetSequence() == 0 || b.GetSequence() > math.MaxInt64 {
		return store.Batch{}, invalid("batch", "batch.sequence", grpcerr.ReasonOutOfRange, "sequence must be > 0 and at most 2^63-1, not %d", b.GetSequence())
	}
	where := fmt.Sprintf("batch %d", b.GetSequence())
	if n := len(b.GetDevices()); n > MaxDevicesPerBatch {
		return store.Batch{}, grpcerr.ResourceExhausted(grpcerr.ReasonOutOfRange, fmt.Sprintf("%s: %d devices, limit %d", where, n, MaxDevicesPerBatch))
	}
	out := store.Batch{Sequence: b.GetSequence()}
	if sp := b.GetSnapshot(); sp != nil {
		if sp.GetSnapshotId() == "" {
			return store.Batch{}, invalid(where, "batch.snapshot.snapshot_id", grpcerr.ReasonRequired, "snapshot_id must be 1-%d bytes", MaxSnapshotIDBytes)
		}
		if err := textcheck.Line("batch.snapshot.snapshot_id", sp.GetSnapshotId(), MaxSnapshotIDBytes); err != nil {
			return store.Batch{}, textErr(where, err)
		}
		out.SnapshotID, out.SnapshotFinal = sp.GetSnapshotId(), sp.GetFinal()
	}
	seen := make(map[string]bool, len(b.GetDevices()))
	for i, d := range b.GetDevices() {
		field := fmt.Sprintf("batch.devices[%d]", i)
		key, err := parseUUID(where, field+".device_id", d.GetDeviceId())
		if err != nil {
			return store.Batch{}, err
		}
		if seen[key] {
			return store.Batch{}, invalid(where, field+".device_id", grpcerr.ReasonInvalidValue, "device %s appears twice", key)
		}
		seen[key] = true
		if d.GetObservedTime() == nil || d.GetObservedTime().CheckValid() != nil {
			return store.Batch{}, invalid(where, field+".observed_time", grpcerr.ReasonInvalidValue, "device %s: observed_time missing or invalid", key)
		}
		u := store.DeviceUpdate{DeviceID: key, Removed: d.GetRemoved(), ObservedTime: d.GetObservedTime().AsTime()}
		if len(d.GetConditions()) > len(condition.Types) {
			return store.Batch{}, invalid(where, field+".conditions", grpcerr.ReasonOutOfRange, "device %s: %d conditions, at most %d", key, len(d.GetConditions()), len(condition.Types))
		}
		types := map[string]bool{}
		for j, pc := range d.GetConditions() {
			c, err := toCondition(where+" device "+key, fmt.Sprintf("%s.conditions[%d]", field, j), pc, false)
			if err != nil {
				return store.Batch{}, err
			}
			if types[string(c.Type)] {
				return store.Batch{}, invalid(where, fmt.Sprintf("%s.conditions[%d].type", field, j), grpcerr.ReasonInvalidValue, "device %s: condition %s appears twice", key, c.Type)
			}
			types[string(c.Type)] = true
			u.Conditions = append(u.Conditions, c)
		}
		if f := d.GetFacts(); f != nil {
			u.Facts = &store.Facts{
				Name: f.GetName(), ProvisionState: f.GetProvisionState(), PowerState: f.GetPowerState(),
				Maintenance: f.GetMaintenance(), ResourceClass: f.GetResourceClass(), InstanceUUID: f.GetInstanceUuid(),
				Lessee: f.GetLessee(), Owner: f.GetOwner(), ConductorGroup: f.GetConductorGroup(), Fault: f.GetFault(),
				CPUs: f.Cpus, MemoryMB: f.MemoryMb, LocalGB: f.LocalGb, CPUArch: f.CpuArch,
			}
			for _, t := range [...]struct{ name, v string }{
				{"name", u.Facts.Name}, {"provision_state", u.Facts.ProvisionState}, {"power_state", u.Facts.PowerState},
				{"resource_class", u.Facts.ResourceClass}, {"instance_uuid", u.Facts.InstanceUUID}, {"lessee", u.Facts.Lessee},
				{"owner", u.Facts.Owner}, {"conductor_group", u.Facts.ConductorGroup}, {"fault", u.Facts.Fault},
				{"cpu_arch", f.GetCpuArch()},
			} {
				if err := textcheck.Line(field+".facts."+t.name, t.v, MaxFactBytes); err != nil {
					return store.Batch{}, textErr(where+" device "+key, err)
				}
			}
			if u.Facts.InstanceMismatches, err = toMismatches(where+" device "+key, field+".facts.instance_mismatches", f.GetInstanceMismatches()); err != nil {
				return store.Batch{}, err
			}
			if err := labels.Check(field+".facts.labels", f.GetLabels()); err != nil {
				return store.Batch{}, invalid(where+" device "+key, field+".facts.labels", grpcerr.ReasonInvalidValue, "%v", err)
			}
			u.Facts.Labels = maps.Clone(f.GetLabels())
		}
		if h := d.GetHardware(); h != nil && !u.Removed {
			if u.Hardware, err = toHardware(where+" device "+key, field+".hardware", h); err != nil {
				return store.Batch{}, err
			}
		}
		out.Devices = append(out.Devices, u)
	}
	return out, nil
}

// toMismatches validates and converts a device's instance mismatches (at
// field): at most MaxInstanceMismatches, each with a kind, ids of at most
// MaxMismatchIDBytes, a status of at most MaxMismatchStatusBytes (one-line
// text) and a valid first_seen_time. It returns nil for none.
func toMismatches(where, field string, ms []*ironlinkv1.InstanceMismatch) ([]store.InstanceMismatch, error) {
	if len(ms) > MaxInstanceMismatches {
		return nil, invalid(where, field, grpcerr.ReasonOutOfRange, "%d instance mismatches, at most %d", len(ms), MaxInstanceMismatches)
	}
	var out []store.InstanceMismatch
	for i, m := range ms {
		f := fmt.Sprintf("%s[%d]", field, i)
		var kind store.MismatchKind
		switch m.GetKind() {
		case ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN:
			kind = store.MismatchNovaUnknown
		case ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE:
			kind = store.MismatchNodeUnaware
		default:
			return nil, invalid(where, f+".kind", grpcerr.ReasonInvalidValue, "instance mismatch %d: kind %v is not NOVA_UNKNOWN or NODE_UNAWARE", i, m.GetKind())
		}
		for _, t := range [...]struct {
			name, v string
			max     int
		}{
			{"ironic_instance_uuid", m.GetIronicInstanceUuid(), MaxMismatchIDBytes}, {"nova_server_id", m.GetNovaServerId(), MaxMismatchIDBytes},
			{"nova_project_id", m.GetNovaProjectId(), MaxMismatchIDBytes}, {"nova_server_status", m.GetNovaServerStatus(), MaxMismatchStatusBytes},
		} {
			if err := textcheck.Line(f+"."+t.name, t.v, t.max); err != nil {
				return nil, textErr(fmt.Sprintf("%s: instance mismatch %d", where, i), err)
			}
		}
		if m.GetFirstSeenTime() == nil || m.GetFirstSeenTime().CheckValid() != nil {
			return nil, invalid(where, f+".first_seen_time", grpcerr.ReasonInvalidValue, "instance mismatch %d: first_seen_time missing or invalid", i)
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
// at most MaxSiteConditions conditions of distinct types, each of a known
// site type valid by condition.Condition.ValidateSite, with one-line type
// and reason and a message of valid text. A nil message is the empty set.
// A condition whose type is one line but neither a site nor a device type
// this hub knows is not stored and is returned in ignored instead of failing the message: a
// satellite newer than the hub may report site conditions the hub does not
// know yet, and a rolling upgrade must not cut its link
// (docs/howto/upgrade.md). Errors are InvalidArgument statuses naming the
// bad condition.
func ToSiteConditions(sc *ironlinkv1.SiteConditions) (conds []condition.Condition, ignored []condition.Type, err error) {
	const where = "site conditions"
	if n := len(sc.GetConditions()); n > MaxSiteConditions {
		return nil, nil, invalid(where, "site_conditions.conditions", grpcerr.ReasonOutOfRange, "%d conditions, at most %d", n, MaxSiteConditions)
	}
	conds = make([]condition.Condition, 0, len(sc.GetConditions()))
	seen := map[condition.Type]bool{}
	for i, pc := range sc.GetConditions() {
		field := fmt.Sprintf("site_conditions.conditions[%d]", i)
		if t := condition.Type(pc.GetType()); t != "" && !t.ValidSite() && !t.Valid() && textcheck.Line(field+".type", pc.GetType(), maxTypeBytes) == nil {
			ignored = append(ignored, t)
			continue
		}
		c, err := toCondition(where, field, pc, true)
		if err != nil {
			return nil, nil, err
		}
		if seen[c.Type] {
			return nil, nil, invalid(where, field+".type", grpcerr.ReasonInvalidValue, "condition %s appears twice", c.Type)
		}
		seen[c.Type] = true
		conds = append(conds, c)
	}
	return conds, ignored, nil
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

func impairmentToProto(i store.Impairment) ironlinkv1.ImpairmentState {
	return wire.EnumFromName[ironlinkv1.ImpairmentState](i, ironlinkv1.ImpairmentState_value, "IMPAIRMENT_STATE_")
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
// MaxCapabilityBytes each (all one-line text), and at most
// MaxAppliedGenerations applied generations whose device ids are UUIDs. It
// returns those device ids in canonical form, for the site check. Errors are
// InvalidArgument statuses naming the field.
func checkHello(h *ironlinkv1.Hello) (appliedDevices []string, err error) {
	const where = "hello"
	if !sitename.Valid(h.GetSite()) {
		return nil, invalid(where, "hello.site", grpcerr.ReasonInvalidValue, "site %s is not a valid site name ([a-z0-9-], 1-63 bytes)", textcheck.Quote(h.GetSite()))
	}
	if err := textcheck.Line("hello.boot_id", h.GetBootId(), MaxHelloTextBytes); err != nil {
		return nil, textErr(where, err)
	}
	if err := textcheck.Line("hello.version", h.GetVersion(), MaxHelloTextBytes); err != nil {
		return nil, textErr(where, err)
	}
	if n := len(h.GetCapabilities()); n > MaxCapabilities {
		return nil, invalid(where, "hello.capabilities", grpcerr.ReasonOutOfRange, "%d capabilities, at most %d", n, MaxCapabilities)
	}
	for i, c := range h.GetCapabilities() {
		if err := textcheck.Line(fmt.Sprintf("hello.capabilities[%d]", i), c, MaxCapabilityBytes); err != nil {
			return nil, textErr(where, err)
		}
	}
	if n := len(h.GetAppliedGenerations()); n > MaxAppliedGenerations {
		return nil, invalid(where, "hello.applied_generations", grpcerr.ReasonOutOfRange, "%d applied generations, at most %d", n, MaxAppliedGenerations)
	}
	for i, g := range h.GetAppliedGenerations() {
		id, err := parseUUID(where, fmt.Sprintf("hello.applied_generations[%d].device_id", i), g.GetDeviceId())
		if err != nil {
			return nil, err
		}
		appliedDevices = append(appliedDevices, id)
	}
	return appliedDevices, nil
}

// ToResult validates a wire CommandResult and converts it: command_id and
// device_id must be UUIDs (stored in canonical form); error and detail are
// cut to MaxResultTextBytes (at a UTF-8 boundary) and must be text
// (textcheck.Text: no NUL or control characters but tab and newline);
// failure_reason must be empty or one CamelCase word (checkFailure).
// Errors are InvalidArgument statuses naming the field.
func ToResult(r *ironlinkv1.CommandResult) (store.CommandResult, error) {
	const where = "command result"
	cid, err := parseUUID(where, "command_result.command_id", r.GetCommandId())
	if err != nil {
		return store.CommandResult{}, err
	}
	did, err := parseUUID(where, "command_result.device_id", r.GetDeviceId())
	if err != nil {
		return store.CommandResult{}, err
	}
	if err := checkFailure(r); err != nil {
		return store.CommandResult{}, err
	}
	out := store.CommandResult{CommandID: cid, DeviceID: did, Generation: r.GetGeneration(), Success: r.GetSuccess(),
		Error: truncate(r.GetError(), MaxResultTextBytes), Detail: truncate(r.GetDetail(), MaxResultTextBytes),
		FailureClass: failureClassFromProto(r.GetFailureClass()), FailureReason: r.GetFailureReason()}
	if err := textcheck.Text("command_result.error", out.Error, MaxResultTextBytes); err != nil {
		return store.CommandResult{}, textErr(where, err)
	}
	if err := textcheck.Text("command_result.detail", out.Detail, MaxResultTextBytes); err != nil {
		return store.CommandResult{}, textErr(where, err)
	}
	return out, nil
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
// as the hub's receive time for the clamp (see ClampBatch): device_id must
// be a UUID, detail (cut to MaxCorrectionDetailBytes) text. Errors are
// InvalidArgument statuses naming the field.
func ToCorrection(c *ironlinkv1.DriftCorrection, now time.Time) (Correction, Skew, error) {
	const where = "drift correction"
	did, err := parseUUID(where, "drift_correction.device_id", c.GetDeviceId())
	if err != nil {
		return Correction{}, Skew{}, err
	}
	detail := truncate(c.GetDetail(), MaxCorrectionDetailBytes)
	if err := textcheck.Text("drift_correction.detail", detail, MaxCorrectionDetailBytes); err != nil {
		return Correction{}, Skew{}, textErr(where, err)
	}
	var sk Skew
	at := now
	if c.GetCorrectTime().IsValid() {
		at = sk.clamp(c.GetCorrectTime().AsTime(), now)
	}
	return Correction{DeviceID: did, Generation: c.GetGeneration(), Detail: detail, At: at}, sk, nil
}
