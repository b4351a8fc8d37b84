package faults

import (
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// Satellite keepalive settings of the freeze scenario, and gRPC-Go's floor
// for client keepalive pings: a client asking for less gets 10 s.
const (
	freezeKeepaliveTime    = 2 * time.Second
	freezeKeepaliveTimeout = 2 * time.Second
	grpcMinClientKeepalive = 10 * time.Second
)

// TestFreezeLinkUntilKeepalive black-holes the link (tcpproxy.Freeze: no
// byte forwarded, no FIN, no RST) while deltas flow and a quarantine is
// issued. The real satellite must notice by its keepalive within
// max(keepalive-time, 10 s gRPC floor) + keepalive-timeout (+3 s slack) and
// reconnect; the link is then thawed, the satellite resumes through a fresh
// connection, and the scripted satellite (no keepalive) resumes on its
// thawed connection. Nothing is lost or doubled; the quarantine completes.
func TestFreezeLinkUntilKeepalive(t *testing.T) { repeat(t, scenarioFreeze) }

func scenarioFreeze(t *testing.T) {
	db, pool := newDatabase(t)
	// The hub's own keepalive stays long (30 s) so that what is measured is
	// the satellite's detection, not the hub closing the connection.
	hub := startHub(t, db, "hub-a", "--keepalive-time", "30s", "--keepalive-timeout", "10s")
	s := newSite(t, "freeze", 40)
	lb := newProxy(t, s.via(t, hub.Addr))
	fc := harness.Fleet(t, hub.Addr)
	sat := s.startSatellite(t, "", lb.Addr(), "--keepalive-time", freezeKeepaliveTime.String(), "--keepalive-timeout", freezeKeepaliveTimeout.String())
	scripted := satsim.New(satsim.Config{Site: "freeze-scripted", Addr: lb.Addr(), Devices: 40, DevicesPerBatch: 10, Window: 4, Logf: t.Logf})
	runSats(t, scripted)
	waitDevices(t, pool, s, 30*time.Second)
	s.churn(t, 200*time.Millisecond)
	scripted.Produce(true)
	flowing(t, pool, []*site{s}, scripted)

	target := s.readyNodes()[0]
	s.addNodeTrait(t, target)
	downs := sat.Count("link down; reconnecting")
	frozen := time.Now()
	lb.Freeze()
	cmd := quarantine(t, fc, target, "fault suite: frozen link", 10*time.Second)

	bound := max(freezeKeepaliveTime, grpcMinClientKeepalive) + freezeKeepaliveTimeout + 3*time.Second
	if err := harness.Within(bound+10*time.Second, func() error {
		if sat.Count("link down; reconnecting") == downs {
			return errorf("satellite has not noticed the frozen link after %s", time.Since(frozen).Round(time.Millisecond))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	detected := time.Since(frozen)
	t.Logf("satellite detected the frozen link after %s (bound %s)", detected.Round(time.Millisecond), bound)
	if detected > bound {
		t.Errorf("satellite detected the frozen link after %s, want within %s = max(keepalive-time %s, gRPC floor %s) + keepalive-timeout %s + 3s",
			detected.Round(time.Millisecond), bound, freezeKeepaliveTime, grpcMinClientKeepalive, freezeKeepaliveTimeout)
	}
	if r, err := fc.GetCommand(t.Context(), &ironlinkv1.GetCommandRequest{CommandId: cmd}); err == nil &&
		r.GetCommand().GetState() == ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED {
		t.Error("the quarantine succeeded through a frozen link")
	}
	accepted := lb.Accepted()
	lb.Thaw()
	harness.Eventually(t, 20*time.Second, func() error {
		if lb.Accepted() <= accepted && linkReplica(pool, s.name) == "" {
			return errorf("satellite not reconnected")
		}
		return nil
	})
	waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	flowing(t, pool, []*site{s}, scripted)
	s.stopChurn()
	drainAndVerify(t, pool, 30*time.Second, scripted)
	s.verify(t, pool, 15*time.Second)
	st := scripted.Stats()
	t.Logf("scripted (no keepalive): %d links, %d acked deltas, %d duplicate acks", st.Links, st.AckedDeltas, st.DupAcks)
}
