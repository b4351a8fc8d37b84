package testlog

import (
	"fmt"
	"strings"
	"testing"
)

func TestRingKeepsTheLastLinesInOrder(t *testing.T) {
	for _, n := range []int{0, 1, keep, keep + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := &ring{}
			var want []string
			for i := range n {
				fmt.Fprintf(r, "line %d\n", i)
				want = append(want, fmt.Sprintf("line %d", i))
			}
			if len(want) > keep {
				want = want[len(want)-keep:]
			}
			if got := r.lines(); got != strings.Join(want, "\n") {
				t.Fatalf("kept %q..., want %d lines from %q", firstLine(got), len(want), firstLine(strings.Join(want, "\n")))
			}
		})
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

func TestNewLogsAtDebug(t *testing.T) {
	log := New(t)
	if !log.Enabled(t.Context(), -4) {
		t.Fatal("debug is off")
	}
	log.Debug("kept for a failure", "k", "v") // nothing shows: the test passes
}
