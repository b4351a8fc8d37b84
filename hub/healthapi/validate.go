package healthapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/healthcheck"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Limits of one ReportHealth request (docs/reference/health.md "Limits").
const (
	// MaxEvents is the most events of one batch.
	MaxEvents = 256
	// MaxEventIDBytes is the longest event id (internal/healthcheck).
	MaxEventIDBytes = healthcheck.MaxEventIDBytes
	// MaxNameBytes is the longest device or node name.
	MaxNameBytes = healthcheck.MaxNameBytes
	// MaxListItems is the most error codes, impacted entities or metadata
	// entries of one event.
	MaxListItems = healthcheck.MaxListItems
	// MaxCodeBytes is the longest error code, entity type or metadata key.
	MaxCodeBytes = healthcheck.MaxCodeBytes
	// MaxValueBytes is the longest entity value or metadata value.
	MaxValueBytes = healthcheck.MaxValueBytes
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
	if err := checkEventText(i, e); err != nil {
		return store.HealthEvent{}, false, err
	}
	deviceID, err := checkDevice(i, f, e)
	if err != nil {
		return store.HealthEvent{}, false, err
	}
	if deviceID != e.GetDeviceId() {
		e = proto.Clone(e).(*ironlinkv1.HealthEvent)
		e.DeviceId = deviceID
	}
	at, clamped, err := healthcheck.GeneratedTime(i, e.GetGeneratedTime(), in.now)
	if err != nil {
		return store.HealthEvent{}, false, fromCheck(err)
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

// checkDevice checks that exactly one of device_id (a UUID in any form
// FleetService takes, healthcheck.DeviceID), device_name and node_name is
// set, and returns the device id canonical ("" when not given).
func checkDevice(i int, f func(string) string, e *ironlinkv1.HealthEvent) (string, error) {
	n := 0
	for _, v := range []string{e.GetDeviceId(), e.GetDeviceName(), e.GetNodeName()} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return "", grpcerr.InvalidArgument(f("device_id"), grpcerr.ReasonInvalidValue,
			fmt.Sprintf("%s, device_name, node_name: exactly one must be set, got %d", f("device_id"), n))
	}
	id, err := healthcheck.DeviceID(i, e.GetDeviceId())
	return id, fromCheck(err)
}

// checkEventText checks every string of event i and the list sizes
// (internal/healthcheck, the check the satellite's door runs too).
func checkEventText(i int, e *ironlinkv1.HealthEvent) error {
	return fromCheck(healthcheck.Event(i, e))
}

// fromCheck turns a *healthcheck.Error into InvalidArgument naming its
// field (nil stays nil).
func fromCheck(err error) error {
	var he *healthcheck.Error
	if errors.As(err, &he) {
		return grpcerr.InvalidArgument(he.Field, he.Reason, he.Error())
	}
	return err
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
