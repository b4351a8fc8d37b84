package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMalformedStateFileSaysWhatToDo: a state file cut short (a careless
// edit, a full disk) stops the satellite; the error names the file and says
// that moving it away is safe, since a satellite without its state file
// re-reads the hub's desired states.
func TestMalformedStateFileSaysWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"garbage": [1,2`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readState(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("readState: %v, want the path and what to do", err)
	}
}
