package loggate

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// The first of a burst is logged at its level with the note, the rest of
// the minute at Debug.
func TestGateOneLoudLineAMinute(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g := New()
	for range 5 {
		g.Log(context.Background(), log, slog.LevelError, "batch: database failed", "err", "down")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], `msg="batch: database failed (logged at debug for a minute)"`) {
		t.Errorf("first line %q, want it at ERROR with the note", lines[0])
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, "level=DEBUG") || !strings.Contains(l, `msg="batch: database failed"`) {
			t.Errorf("later line %q, want it at DEBUG without the note", l)
		}
	}
}
