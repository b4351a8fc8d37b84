package healthdoor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ironlink/ironlink/gen/datamodels"
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/healthcheck"
	"github.com/ironlink/ironlink/internal/reporterlimit"
	"github.com/ironlink/ironlink/internal/rpcstatus"
)

// MaxEvents is the most events of one HealthEventOccurredV1 call (the
// hub's HealthService limit).
const MaxEvents = 256

// DefaultWait is how long a call waits for the hub's answer before it
// returns Unavailable, its batch still spooled (--health-wait).
const DefaultWait = 30 * time.Second

// Server implements datamodels.PlatformConnectorServer over a Spool.
type Server struct {
	datamodels.UnimplementedPlatformConnectorServer
	spool   *Spool
	wait    time.Duration
	metrics *Metrics
	log     *slog.Logger
	lim     *reporterlimit.Limiter // nil: no per-agent limit (throttle.go)
}

// NewServer returns the door over spool; a call waits at most wait (≤ 0:
// DefaultWait) for the hub's answer.
func NewServer(spool *Spool, wait time.Duration, m *Metrics, log *slog.Logger) *Server {
	if wait <= 0 {
		wait = DefaultWait
	}
	return &Server{spool: spool, wait: wait, metrics: m, log: log}
}

// HealthEventOccurredV1 checks the batch, spools it for the hub and
// answers once the hub committed it (Empty) or refused it (the hub's
// status: InvalidArgument, NotFound, FailedPrecondition). Errors of its
// own: InvalidArgument naming the field (events[i].<ironlink field>) for a
// batch the hub would refuse anyway; Unavailable when the hub did not
// answer within the wait (the batch stays spooled and is forwarded: a
// retry is harmless, the hub recognises the events) or the full spool
// dropped it; the caller's own deadline.
func (s *Server) HealthEventOccurredV1(ctx context.Context, in *datamodels.HealthEvents) (*emptypb.Empty, error) {
	// The batch's size first: an oversized batch spends no agent's
	// tokens and adds no agent to the limiter.
	if err := checkSize(in); err != nil {
		s.metrics.add(OutcomeRefused, len(in.GetEvents()))
		return nil, err
	}
	if err := s.throttle(in); err != nil {
		return nil, err
	}
	events, err := Convert(in)
	if err != nil {
		s.metrics.add(OutcomeRefused, len(in.GetEvents()))
		s.log.Info("health report refused by the door", "events", len(in.GetEvents()), "err", err)
		return nil, err
	}
	r := s.spool.put(events)
	if r == nil {
		s.metrics.add(OutcomeRefused, len(events))
		return nil, rpcstatus.Errorf(codes.ResourceExhausted, "events: %d events do not fit the health spool (--health-spool-events)", len(events))
	}
	s.metrics.add(OutcomeAccepted, len(events))
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case res := <-r.done:
		if res.GetCode() != 0 {
			return nil, rpcstatus.Error(codes.Code(res.GetCode()), res.GetMessage())
		}
		return &emptypb.Empty{}, nil
	case <-t.C:
		return nil, rpcstatus.Errorf(codes.Unavailable, "the hub has not answered within %s (link down?): the events stay spooled and are forwarded when the link is back", s.wait)
	case <-ctx.Done():
		return nil, rpcstatus.FromContext(ctx.Err())
	}
}

// checkSize refuses a batch of no events or more than MaxEvents
// (InvalidArgument).
func checkSize(in *datamodels.HealthEvents) error {
	if n := len(in.GetEvents()); n == 0 || n > MaxEvents {
		return rpcstatus.Errorf(codes.InvalidArgument, "events: %d events, want 1 to %d", n, MaxEvents)
	}
	return nil
}

// Convert checks a NVSentinel batch and turns it into ironlink's
// HealthEvents (node_name set from nodeName, no event id: the hub derives
// one from the content, so a resent event is recognised). Errors are
// InvalidArgument naming the field as ironlink's HealthService names it.
// Numbers of NVSentinel's enums ironlink does not know are kept.
func Convert(in *datamodels.HealthEvents) ([]*ironlinkv1.HealthEvent, error) {
	if err := checkSize(in); err != nil {
		return nil, err
	}
	n := len(in.GetEvents())
	out := make([]*ironlinkv1.HealthEvent, n)
	for i, e := range in.GetEvents() {
		if err := check(i, e); err != nil {
			return nil, rpcstatus.Error(codes.InvalidArgument, err.Error())
		}
		ev := &ironlinkv1.HealthEvent{NodeName: e.GetNodeName(), Agent: e.GetAgent(), ComponentClass: e.GetComponentClass(),
			CheckName: e.GetCheckName(), IsFatal: e.GetIsFatal(), IsHealthy: e.GetIsHealthy(), Message: e.GetMessage(),
			RecommendedAction:  ironlinkv1.HealthRecommendedAction(e.GetRecommendedAction()),
			ErrorCodes:         e.GetErrorCode(),
			Metadata:           e.GetMetadata(),
			GeneratedTime:      e.GetGeneratedTimestamp(),
			ProcessingStrategy: ironlinkv1.HealthProcessingStrategy(e.GetProcessingStrategy())}
		for _, x := range e.GetEntitiesImpacted() {
			ev.EntitiesImpacted = append(ev.EntitiesImpacted, &ironlinkv1.HealthEntity{EntityType: x.GetEntityType(), EntityValue: x.GetEntityValue()})
		}
		if err := healthcheck.Event(i, ev); err != nil {
			return nil, rpcstatus.Error(codes.InvalidArgument, err.Error())
		}
		out[i] = ev
	}
	return out, nil
}

// check is the door's own check of event i besides healthcheck.Event
// (every string, the names, the list sizes: the hub's check): a node name
// and a generated time are required, the time at most
// healthcheck.MaxAge old (a future one is the hub's to clamp; the hub
// checks the device).
func check(i int, e *datamodels.HealthEvent) error {
	f := func(name string) string { return fmt.Sprintf("events[%d].%s", i, name) }
	if e.GetNodeName() == "" {
		return errors.New(f("node_name") + " is required (NVSentinel's nodeName: a host name or an IP address)")
	}
	if _, _, err := healthcheck.GeneratedTime(i, e.GetGeneratedTimestamp(), time.Now()); err != nil {
		return err
	}
	return nil
}

// Listen opens the door's Unix socket at path with mode 0660 (a stale
// socket file left by an earlier run is removed first).
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale health socket %s: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("health socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("health socket %s: %w", path, err)
	}
	return ln, nil
}

// Serve serves the door on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// The decode options: a string that is not UTF-8 is InvalidArgument
	// naming the field (as at the hub's door), not grpc-go's Internal.
	g := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(4 << 20)},
		rpcstatus.DecodeOptions(decodeStatus, nil)...)...)
	datamodels.RegisterPlatformConnectorServer(g, s)
	go func() {
		<-ctx.Done()
		g.GracefulStop()
	}()
	if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("health door: %w", err)
	}
	return nil
}

// ironlinkNames are the names the door's errors use for NVSentinel's
// fields (ironlink's HealthEvent's, as Convert maps them).
var ironlinkNames = map[string]string{"nodeName": "node_name", "componentClass": "component_class",
	"checkName": "check_name", "recommendedAction": "recommended_action", "errorCode": "error_codes",
	"entitiesImpacted": "entities_impacted", "entityType": "entity_type", "entityValue": "entity_value",
	"generatedTimestamp": "generated_time", "processingStrategy": "processing_strategy"}

// decodeStatus is the door's status of a request that could not be
// decoded: rpcstatus.DecodeStatus with the field named as the door's other
// errors name it ("events[2].node_name", not NVSentinel's
// "events[2].nodeName").
func decodeStatus(f rpcstatus.DecodeFailure) error {
	if f.Field != "" {
		parts := strings.Split(f.Field, ".")
		for i, p := range parts {
			name, index, _ := strings.Cut(p, "[")
			if n, ok := ironlinkNames[name]; ok {
				parts[i] = n
				if index != "" {
					parts[i] += "[" + index
				}
			}
		}
		f.Field = strings.Join(parts, ".")
	}
	return rpcstatus.DecodeStatus(f)
}
