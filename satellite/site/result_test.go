package site_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/site"
)

func TestResultSaysWhatToDoNext(t *testing.T) {
	cases := []struct {
		name      string
		r         site.Result
		done      bool
		permanent bool
		text      string
	}{
		{"zero is done", site.Result{}, true, false, "done"},
		{"done", site.Done(), true, false, "done"},
		{"waiting", site.RetryAfter(2*time.Second, ""), false, false, "retry after 2s"},
		{"transient", site.RetryAfter(0, "NodeLocked"), false, false, "retry after 0s (NodeLocked)"},
		{"permanent", site.Failed("InvalidState", "node %s is %s", "n1", "active"), false, true, "failed InvalidState: node n1 is active"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.r.IsDone() != tc.done || tc.r.Permanent() != tc.permanent || tc.r.String() != tc.text {
				t.Errorf("%+v: done %v permanent %v %q", tc.r, tc.r.IsDone(), tc.r.Permanent(), tc.r.String())
			}
			if (tc.r.Err() != nil) != tc.permanent {
				t.Errorf("Err() = %v", tc.r.Err())
			}
		})
	}
	f := site.Failed("PortConflict", "MAC %s", "aa")
	got, ok := site.AsResult(fmt.Errorf("ensure ports: %w", f.Err()))
	if !ok || got != f {
		t.Errorf("AsResult through a wrap: %+v %v", got, ok)
	}
	if _, ok := site.AsResult(errors.New("plain")); ok {
		t.Error("a plain error carries no Result")
	}
}
