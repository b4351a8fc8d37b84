package healthapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Limits of one ReportHealth request (docs/reference/health.md "Limits").
const (
	// MaxEvents is the most events of one batch.
	MaxEvents = 256
	// MaxEventIDBytes is the longest event id.
	MaxEventIDBytes = 128
	// MaxNameBytes is the longest device or node name.
	MaxNameBytes = 255
	// MaxListItems is the most error codes, impacted entities or metadata
	// entries of one event.
	MaxListItems = 32
	// MaxCodeBytes is the longest error code, entity type or metadata key.
	MaxCodeBytes = 64
	// MaxValueBytes is the longest entity value or metadata value.
	MaxValueBytes = 256
	// MaxTTL is the longest TTL an event may ask for.
	MaxTTL = 7 * 24 * time.Hour
)

// eventInput is what validation needs besides the event.
type eventInput struct {
	now        time.Time
	defaultTTL time.Duration
	agentTTL   map[string]time.Duration
}

// toStoreEvent validates event i of a request and converts it; clamped
// reports a generated time in the future set to now. Errors are
// InvalidArgument naming the field (events[i].<field>).
func (in eventInput) toStoreEvent(i int, e *ironlinkv1.HealthEvent) (ev store.HealthEvent, clamped bool, err error) {
	f := func(name string) string { return fmt.Sprintf("events[%d].%s", i, name) }
	if err := checkEventText(f, e); err != nil {
		return store.HealthEvent{}, false, err
	}
	if err := checkDevice(f, e); err != nil {
		return store.HealthEvent{}, false, err
	}
	for name, v := range map[string]string{"agent": e.GetAgent(), "component_class": e.GetComponentClass(), "check_name": e.GetCheckName()} {
		if !condition.ValidHealthName(v) {
			return store.HealthEvent{}, false, grpcerr.InvalidArgument(f(name), grpcerr.ReasonInvalidValue,
				fmt.Sprintf("%s must be 1 to %d ASCII letters, digits, '_', '-' or '.'", f(name), condition.MaxHealthNameBytes))
		}
	}
	gen := e.GetGeneratedTime()
	if gen == nil || gen.CheckValid() != nil || gen.AsTime().IsZero() {
		return store.HealthEvent{}, false, grpcerr.InvalidArgument(f("generated_time"), grpcerr.ReasonInvalidValue, f("generated_time")+" is missing or not a valid time")
	}
	at := gen.AsTime().UTC()
	if at.After(in.now) {
		at, clamped = in.now, true
	}
	ttl, err := in.ttl(f, e)
	if err != nil {
		return store.HealthEvent{}, false, err
	}
	id := e.GetEventId()
	if id == "" {
		id = contentID(e)
	}
	h := &condition.Health{
		Agent: e.GetAgent(), ComponentClass: e.GetComponentClass(), CheckName: e.GetCheckName(), Fatal: e.GetIsFatal(),
		RecommendedAction: int32(e.GetRecommendedAction()), ErrorCodes: e.GetErrorCodes(),
		ProcessingStrategy: int32(e.GetProcessingStrategy()), GeneratedTime: at, ExpireTime: at.Add(ttl), EventID: id,
		Metadata: e.GetMetadata(),
	}
	for _, x := range e.GetEntitiesImpacted() {
		h.Entities = append(h.Entities, condition.Entity{Type: x.GetEntityType(), Value: x.GetEntityValue()})
	}
	c := condition.Condition{Type: condition.HealthType(h.ComponentClass, h.CheckName), Status: condition.True, Reason: condition.ReasonHealthy,
		Message: e.GetMessage(), LastTransitionTime: at, ObservedTime: at, Health: h}
	if !e.GetIsHealthy() {
		c.Status, c.Reason = condition.False, condition.ReasonNonFatalError
		if h.Fatal {
			c.Reason = condition.ReasonFatalError
		}
	}
	return store.HealthEvent{EventID: id, DeviceID: e.GetDeviceId(), DeviceName: e.GetDeviceName(), NodeName: e.GetNodeName(), Condition: c}, clamped, nil
}

// ttl is the event's TTL, else its agent's, else the default.
func (in eventInput) ttl(f func(string) string, e *ironlinkv1.HealthEvent) (time.Duration, error) {
	if d := e.GetTtl(); d != nil {
		v := d.AsDuration()
		if d.CheckValid() != nil || v <= 0 || v > MaxTTL {
			return 0, grpcerr.InvalidArgument(f("ttl"), grpcerr.ReasonInvalidValue, fmt.Sprintf("%s must be positive and at most %s", f("ttl"), MaxTTL))
		}
		return v, nil
	}
	if v, ok := in.agentTTL[e.GetAgent()]; ok {
		return v, nil
	}
	return in.defaultTTL, nil
}

// checkDevice checks that exactly one of device_id (a canonical UUID),
// device_name and node_name is set.
func checkDevice(f func(string) string, e *ironlinkv1.HealthEvent) error {
	n := 0
	for _, v := range []string{e.GetDeviceId(), e.GetDeviceName(), e.GetNodeName()} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return grpcerr.InvalidArgument(f("device_id"), grpcerr.ReasonInvalidValue,
			fmt.Sprintf("%s, device_name, node_name: exactly one must be set, got %d", f("device_id"), n))
	}
	if id := e.GetDeviceId(); id != "" {
		if u, err := uuid.Parse(id); err != nil || u.String() != id {
			return grpcerr.InvalidArgument(f("device_id"), grpcerr.ReasonInvalidValue, f("device_id")+" is not a canonical UUID "+textcheck.Quote(id))
		}
	}
	return nil
}

// checkEventText checks every text field of e for length, UTF-8 and
// control characters (NUL included), and the list sizes.
func checkEventText(f func(string) string, e *ironlinkv1.HealthEvent) error {
	lines := []struct {
		name string
		v    string
		max  int
	}{
		{"event_id", e.GetEventId(), MaxEventIDBytes}, {"device_name", e.GetDeviceName(), MaxNameBytes},
		{"node_name", e.GetNodeName(), MaxNameBytes}, {"agent", e.GetAgent(), condition.MaxHealthNameBytes},
	}
	for _, l := range lines {
		if err := textcheck.Line(f(l.name), l.v, l.max); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	if err := textcheck.Text(f("message"), e.GetMessage(), condition.MaxMessageBytes); err != nil {
		return grpcerr.FromCheck(err)
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"error_codes", len(e.GetErrorCodes())}, {"entities_impacted", len(e.GetEntitiesImpacted())}, {"metadata", len(e.GetMetadata())}} {
		if l.n > MaxListItems {
			return grpcerr.InvalidArgument(f(l.name), grpcerr.ReasonInvalidValue,
				fmt.Sprintf("%s has %d entries, at most %d", f(l.name), l.n, MaxListItems))
		}
	}
	for j, c := range e.GetErrorCodes() {
		if err := textcheck.Line(f(fmt.Sprintf("error_codes[%d]", j)), c, MaxCodeBytes); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	for j, x := range e.GetEntitiesImpacted() {
		if err := textcheck.Line(f(fmt.Sprintf("entities_impacted[%d].entity_type", j)), x.GetEntityType(), MaxCodeBytes); err != nil {
			return grpcerr.FromCheck(err)
		}
		if err := textcheck.Line(f(fmt.Sprintf("entities_impacted[%d].entity_value", j)), x.GetEntityValue(), MaxValueBytes); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	for k, v := range e.GetMetadata() {
		if err := textcheck.Line(f("metadata"), k, MaxCodeBytes); err != nil {
			var te *textcheck.Error
			if errors.As(err, &te) {
				te.Detail = "key " + te.Detail // "events[0].metadata key is 65 bytes, limit 64"
			}
			return grpcerr.FromCheck(err)
		}
		if err := textcheck.Line(f("metadata["+k+"]"), v, MaxValueBytes); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	return nil
}

// contentID derives an event id from the event's content (every field but
// event_id, deterministic protobuf encoding): the same event sent twice
// gets the same id.
func contentID(e *ironlinkv1.HealthEvent) string {
	c := proto.Clone(e).(*ironlinkv1.HealthEvent)
	c.EventId = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// ParseAgentTTL parses the hub's --health-agent-ttl: comma-separated
// agent=duration pairs, for example "gpu-health-monitor=5m,bmc-sel=30m"
// ("" is none). Each agent must be a valid health name and each duration
// positive and at most MaxTTL.
func ParseAgentTTL(spec string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if spec == "" {
		return out, nil
	}
	for _, pair := range strings.Split(spec, ",") {
		agent, d, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || !condition.ValidHealthName(agent) {
			return nil, fmt.Errorf("%q is not agent=duration (agent: 1-%d of [A-Za-z0-9_.-])", textcheck.Prefix(pair, textcheck.EchoBytes), condition.MaxHealthNameBytes)
		}
		v, err := time.ParseDuration(d)
		if err != nil || v <= 0 || v > MaxTTL {
			return nil, fmt.Errorf("agent %s: TTL %q must be a positive duration of at most %s", agent, textcheck.Prefix(d, textcheck.EchoBytes), MaxTTL)
		}
		out[agent] = v
	}
	return out, nil
}
