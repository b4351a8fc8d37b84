package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

// fieldStripper sits between the satellite and the real Ironic like a
// proxy that replays the hazard: while on, every node-list page requested
// with a marker (pages 2+) loses every key outside Ironic's default field
// set, as if the server had ignored ?fields=.
type fieldStripper struct {
	on       atomic.Bool
	mu       sync.Mutex
	pages    int // pages stripped
	nodes    int // nodes stripped
	requests int // node-list requests seen
}

var ironicDefaultKeys = []string{"uuid", "name", "instance_uuid", "power_state", "provision_state", "maintenance", "links"}

func (s *fieldStripper) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err != nil || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/v1/nodes") {
			return resp, err
		}
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		if !s.on.Load() || r.URL.Query().Get("marker") == "" || resp.StatusCode != http.StatusOK {
			return resp, nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		var page map[string]any
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, err
		}
		nodes, _ := page["nodes"].([]any)
		for _, n := range nodes {
			m, _ := n.(map[string]any)
			for k := range m {
				if !slices.Contains(ironicDefaultKeys, k) {
					delete(m, k)
				}
			}
		}
		s.mu.Lock()
		s.pages++
		s.nodes += len(nodes)
		s.mu.Unlock()
		out, err := json.Marshal(page)
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(out))
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
		return resp, nil
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// condKey is one condition's observable value.
type condKey struct{ status, reason, message string }

// factsKey is the key under which conditionValues keeps a device's facts.
const factsKey = "facts"

// conditionValues indexes a snapshot: device → condition type → value,
// with the device's facts (as text) under factsKey.
func conditionValues(devs []*ironlinkv1.DeviceUpdate) map[string]map[string]condKey {
	out := map[string]map[string]condKey{}
	for _, d := range devs {
		m := map[string]condKey{}
		for _, c := range d.GetConditions() {
			m[c.GetType()] = condKey{c.GetStatus().String(), c.GetReason(), c.GetMessage()}
		}
		if d.GetFacts() != nil {
			m[factsKey] = condKey{message: prototext.Format(d.GetFacts())}
		}
		out[d.GetDeviceId()] = m
	}
	return out
}

// TestRealFieldsLeftOutOfLaterPagesFlipNothing runs the real-bed
// reproduction: the real Ironic listed in pages of 3 through a proxy that
// strips every non-default field from pages 2+. The poll with stripped
// pages must change no condition of any node (and the one after, with the
// fields back, neither): any delta it pushes that the following complete
// listing does not confirm is an invented flip.
func TestRealFieldsLeftOutOfLaterPagesFlipNothing(t *testing.T) {
	cfg := ostest.RealCloudConfig(t)
	strip := &fieldStripper{}
	cfg.WrapTransport = strip.wrap
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := openstack.Connect(ctx, cfg, ostest.Logger(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.PageLimit = 3
	cl := agent.Clients{Ironic: ir}
	if !c.Standalone() {
		cl.Placement = placement.New(c.Placement, ostest.Logger(t))
	}
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	// Every test bed node is of class gpu-h100: all in the pool, so a lost
	// resource_class would flip InValidationPool.
	acfg := agent.Config{PollInterval: time.Hour, Conditions: conditions.Config{
		ValidationPool: conditions.Selector{ResourceClass: envOr("IRONLINK_E2E_POOL_CLASS", "gpu-h100")}, Standalone: c.Standalone()}}
	a := agent.New(acfg, cl, out, nil, ostest.Logger(t))

	poll := func(label string) []*ironlinkv1.DeviceUpdate {
		t.Helper()
		if err := a.Poll(ctx); err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		var devs []*ironlinkv1.DeviceUpdate
		for _, b := range out.Take(a.Snapshot) {
			devs = append(devs, b.GetDevices()...)
		}
		return devs
	}
	// Two complete listings: the second shows how still the bed is.
	poll("complete listing 1")
	before := conditionValues(freshSnapshot(t, out, a))
	if len(before) < 4 {
		t.Fatalf("the real cloud lists %d nodes; need at least 4 for a page 2 of 3", len(before))
	}
	if d := poll("complete listing 2"); len(d) > 0 {
		t.Logf("the bed itself changed %d devices between two complete listings", len(d))
		before = conditionValues(freshSnapshot(t, out, a))
	}

	strip.on.Store(true)
	heldBefore := a.Stats().HeldConditions
	stripped := poll("listing with pages 2+ stripped")
	strip.on.Store(false)
	held := a.Stats().HeldConditions - heldBefore
	strip.mu.Lock()
	t.Logf("stripped %d nodes on %d pages of 3 (of %d nodes); %d conditions held at their last known value; the stripped poll pushed %d device updates",
		strip.nodes, strip.pages, len(before), held, len(stripped))
	strippedNodes := strip.nodes
	strip.mu.Unlock()
	if strippedNodes == 0 {
		t.Fatal("no page was stripped: the proxy did not see pages 2+")
	}
	if held == 0 {
		t.Error("no condition was held although fields were stripped")
	}
	back := poll("complete listing after")
	after := conditionValues(freshSnapshot(t, out, a))

	flips, factFlips := 0, 0
	for _, d := range stripped {
		if f := d.GetFacts(); f != nil {
			was, now := before[d.GetDeviceId()][factsKey], after[d.GetDeviceId()][factsKey]
			if was == now && prototext.Format(f) != was.message {
				factFlips++
				t.Errorf("stripped poll changed the facts of %s: %s → %s", d.GetDeviceId(), was.message, prototext.Format(f))
			}
		}
		for _, c := range d.GetConditions() {
			was, now := before[d.GetDeviceId()][c.GetType()], after[d.GetDeviceId()][c.GetType()]
			if was == now { // the complete listing after says nothing changed
				flips++
				t.Errorf("stripped poll flipped %s %s: %v → %s/%s %q, back to %v", d.GetDeviceId(), c.GetType(), was,
					c.GetStatus(), c.GetReason(), c.GetMessage(), now)
			}
		}
	}
	for _, d := range back {
		for _, c := range d.GetConditions() {
			if before[d.GetDeviceId()][c.GetType()] == (condKey{c.GetStatus().String(), c.GetReason(), c.GetMessage()}) {
				flips++
				t.Errorf("complete poll after the stripped one flipped %s %s back to %v", d.GetDeviceId(), c.GetType(), before[d.GetDeviceId()][c.GetType()])
			}
		}
	}
	t.Logf("condition flips: %d, fact flips: %d (the complete poll after pushed %d device updates)", flips, factFlips, len(back))
}
