package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/satellite/agent"
)

// A state file that cannot be written (its directory replaced by a file,
// as a full or read-only disk would refuse it) leaves the satellite
// serving — polls and sweeps go on — and says so as the site condition
// StateFileWritten False/WriteFailed naming the file and the error; the
// next write after the directory is back turns it True/Written, and the
// file then holds the whole state.
func TestStateFileWriteFailureIsASiteCondition(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	s := newFxSweepSite(t, agent.Config{StatePath: path}, false)
	s.node("n-reported", "active", "0b3f9c2e-6666-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t)
	want := func(st condition.Status, reason string) {
		t.Helper()
		c, ok := s.site.Get(condition.StateFileWritten)
		if !ok || c.Status != st || c.Reason != reason || !strings.Contains(c.Message, path) {
			t.Fatalf("StateFileWritten: %+v (set %v), want %s/%s naming %s", c, ok, st, reason, path)
		}
	}
	want(condition.True, agent.ReasonStateWritten)

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // the directory is now a file: no write can succeed
		t.Fatal(err)
	}
	s.node("n-second", "active", "0b3f9c2e-7777-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t) // still serving
	s.sweep(t)
	s.sweep(t)
	want(condition.False, agent.ReasonStateWriteFailed)
	if c, _ := s.site.Get(condition.StateFileWritten); !strings.Contains(c.Message, "not a directory") {
		t.Errorf("the condition does not say why: %q", c.Message)
	}

	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.node("n-third", "active", "0b3f9c2e-8888-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t)
	want(condition.True, agent.ReasonStateWritten)
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "0b3f9c2e-6666") || !strings.Contains(string(b), "0b3f9c2e-7777") {
		t.Fatalf("state file after recovery: %s (%v), want both instances remembered", b, err)
	}
}
