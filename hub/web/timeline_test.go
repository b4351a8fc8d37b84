package web

import (
	"strings"
	"testing"
	"time"
)

func TestBuildTimeline(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		lanes     []tlLane
		marks     []tlMark
		wantFrom  time.Time
		wantRects []string // class:x0-x1 rounded, in order
	}{
		{
			name: "a fresh device gets the minimum span",
			lanes: []tlLane{{Label: "operational status", Prefix: "st-", Points: []tlPoint{
				{At: now.Add(-time.Minute), State: "AVAILABLE"}}}},
			wantFrom: now.Add(-tlMinSpan - tlMinSpan/50),
		},
		{
			name: "unsorted changes become consecutive segments ending now",
			lanes: []tlLane{{Label: "Enrolled", Prefix: "cond-", Points: []tlPoint{
				{At: now.Add(-time.Hour), State: "False"}, {At: now.Add(-2 * time.Hour), State: "True"}}}},
			wantFrom:  now.Add(-2*time.Hour - 2*time.Hour/50),
			wantRects: []string{"cond-True", "cond-False"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := buildTimeline(now, tc.lanes, tc.marks)
			if !tl.From.Equal(tc.wantFrom) || !tl.To.Equal(now) {
				t.Fatalf("range %s–%s, want %s–%s", tl.From, tl.To, tc.wantFrom, now)
			}
			end := tl.PlotX + tl.PlotW
			for i, r := range tl.Rects {
				if r.X < tl.PlotX-0.01 || r.X+r.W > end+1.01 {
					t.Errorf("rect %d %+v outside the plot [%v, %v]", i, r, tl.PlotX, end)
				}
				if i+1 < len(tl.Rects) && r.Y == tl.Rects[i+1].Y && abs(r.X+r.W-tl.Rects[i+1].X) > 0.01 {
					t.Errorf("rect %d ends at %v, next starts at %v", i, r.X+r.W, tl.Rects[i+1].X)
				}
			}
			if last := tl.Rects[len(tl.Rects)-1]; abs(last.X+last.W-end) > 0.01 {
				t.Errorf("last segment ends at %v, want now at %v", last.X+last.W, end)
			}
			for i, c := range tc.wantRects {
				if tl.Rects[i].Class != c {
					t.Errorf("rect %d class %s, want %s", i, tl.Rects[i].Class, c)
				}
			}
			if tl.Height <= int(tl.LanesH) || len(tl.Ticks) != 7 || !strings.Contains(tl.Rects[0].Title, "since") {
				t.Errorf("geometry: height %d lanes %v ticks %d title %q", tl.Height, tl.LanesH, len(tl.Ticks), tl.Rects[0].Title)
			} else if last := tl.Ticks[len(tl.Ticks)-1]; last.Anchor != "end" || tl.Ticks[0].Anchor != "middle" {
				t.Errorf("the last tick sits at the right edge: anchors %q … %q, want middle … end", tl.Ticks[0].Anchor, last.Anchor)
			}
		})
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
