package faults

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// TestSatelliteStateDiskFull: the satellite's state file lives on a 64 KiB
// tmpfs (mounted by the test: it needs root, or CAP_SYS_ADMIN; without root
// it skips and says so, except under CI=true, where it fails). With the filesystem filled, a quarantine still
// SUCCEEDS (the satellite keeps serving), its /metrics and the hub's view
// of the site say StateFileWritten False/WriteFailed naming "no space left
// on device", and the satellite does not exit; once space is back the next
// write (another command) succeeds and both say True/Written again, the
// file holding both commanded devices.
func TestSatelliteStateDiskFull(t *testing.T) { repeat(t, scenarioStateDiskFull) }

func scenarioStateDiskFull(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") != "true" {
		t.Skip("needs root (CAP_SYS_ADMIN) to mount a tmpfs; under CI=true this is a failure, not a skip")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a 64 KiB tmpfs on %s (the test needs root or CAP_SYS_ADMIN): %v: %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })

	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "fulldisk", 10)
	s.stateFile = filepath.Join(dir, "state.json")
	metrics := harness.FreeAddr(t)
	sat := s.startSatellite(t, "", hub.Addr, "--metrics-addr", metrics)
	waitDevices(t, pool, s, 30*time.Second)
	ready := s.readyNodes()
	first, second, third := ready[0], ready[1], ready[2]

	waitCommand(t, fc, quarantine(t, fc, first, "fault suite: disk full, before", 10*time.Second), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	stateWritten(t, fc, metrics, s.name, "True", "Written", "")

	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	waitCommand(t, fc, quarantine(t, fc, second, "fault suite: disk full", 10*time.Second), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	stateWritten(t, fc, metrics, s.name, "False", "WriteFailed", "no space left on device")
	t.Logf("disk full: quarantine SUCCEEDED, StateFileWritten False/WriteFailed on the satellite's /metrics and the hub; satellite log lines: %d",
		sat.Count("applied desired states not saved")+sat.Count("no space left on device"))
	if sat.Exited() {
		t.Fatalf("satellite exited with its disk full: %v", sat.ExitErr())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitCommand(t, fc, quarantine(t, fc, third, "fault suite: disk space back", 10*time.Second), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	stateWritten(t, fc, metrics, s.name, "True", "Written", "")
	b, err := os.ReadFile(s.stateFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first, second, third} {
		if !strings.Contains(string(b), id) {
			t.Errorf("the state file written once space is back lacks device %s", id)
		}
	}
	checkCommands(t, pool, s)
}

// fill writes path until its filesystem has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v, want ENOSPC", path, err)
			}
			return
		}
	}
}

// stateWritten waits until the satellite's /metrics at addr and the hub's
// ListSites both show site's StateFileWritten with status and reason (the
// hub's message containing msg).
func stateWritten(t *testing.T, fc ironlinkv1.FleetServiceClient, addr, site, status, reason, msg string) {
	t.Helper()
	line := `ironlink_satellite_site_condition{reason="` + reason + `",status="` + status + `",type="StateFileWritten"} 1`
	harness.Eventually(t, 30*time.Second, func() error {
		r, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if !strings.Contains(string(b), line) {
			return errorf("no %s in the satellite's /metrics", line)
		}
		resp, err := fc.ListSites(t.Context(), &ironlinkv1.ListSitesRequest{})
		if err != nil {
			return err
		}
		for _, st := range resp.GetSites() {
			if st.GetName() != site {
				continue
			}
			for _, c := range st.GetConditions() {
				if c.GetType() == "StateFileWritten" {
					if got := strings.TrimPrefix(c.GetStatus().String(), "CONDITION_STATUS_"); !strings.EqualFold(got, status) || c.GetReason() != reason || !strings.Contains(c.GetMessage(), msg) {
						return errorf("the hub shows StateFileWritten %s/%s %q, want %s/%s naming %q", got, c.GetReason(), c.GetMessage(), status, reason, msg)
					}
					return nil
				}
			}
			return errorf("the hub shows no StateFileWritten for %s", site)
		}
		return errorf("no site %s", site)
	})
}
