package web

import (
	"fmt"
	"sort"
	"time"
)

// The device page's timeline: one lane for the operational status, one per
// condition type and one for quarantine/release, drawn server-side as an
// inline SVG (no script, no chart library). Coordinates are in the SVG's
// viewBox units; the SVG scales to the page width.

// Timeline geometry (viewBox units).
const (
	tlWidth  = 1000
	tlLabelW = 170
	tlRightM = 12
	tlLaneH  = 22
	tlGap    = 6
	tlTop    = 8
	tlAxisH  = 26
)

// tlPoint is one change on a lane: from At on, the lane is in State.
type tlPoint struct {
	At     time.Time
	State  string // class suffix: a status name, True/False/Unknown
	Title  string // tooltip
	Reason string
}

// tlLane is one input lane.
type tlLane struct {
	Label  string
	Prefix string // class prefix: "st-" or "cond-"
	Points []tlPoint
}

// tlMark is one instant event (a quarantine or release).
type tlMark struct {
	At    time.Time
	Class string
	Title string
}

// svgRect, svgMark, svgTick, svgLabel are what the template draws.
type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type svgMark struct {
	X, Y   float64
	Points string
	Class  string
	Title  string
}

type svgTick struct {
	X     float64
	Label string
	// Anchor is the label's text-anchor: "end" for the last tick, which sits
	// at the plot's right edge (centred, its right half was cut off).
	Anchor string
}

type svgLabel struct {
	Y     float64
	Text  string
	Class string
}

// timelineSVG is the template data of the chart.
type timelineSVG struct {
	Width, Height  int
	PlotX, PlotW   float64
	AxisY, LanesH  float64
	Labels         []svgLabel
	Rects          []svgRect
	Marks          []svgMark
	Ticks          []svgTick
	From, To       time.Time
	Empty          bool
	QuarantineLane float64
}

// tlMinSpan is the shortest time range the chart shows.
const tlMinSpan = 5 * time.Minute

// buildTimeline lays lanes and marks out between the earliest change shown
// and now (at least tlMinSpan). Points need not be sorted.
func buildTimeline(now time.Time, lanes []tlLane, marks []tlMark) timelineSVG {
	from := now
	empty := true
	for _, l := range lanes {
		for _, p := range l.Points {
			empty = false
			if p.At.Before(from) {
				from = p.At
			}
		}
	}
	for _, m := range marks {
		if m.At.Before(from) {
			from = m.At
		}
	}
	if now.Sub(from) < tlMinSpan {
		from = now.Add(-tlMinSpan)
	}
	span := now.Sub(from)
	// A little room on the left so the first change is visible as an edge.
	from = from.Add(-span / 50)
	span = now.Sub(from)
	t := timelineSVG{Width: tlWidth, PlotX: tlLabelW, PlotW: tlWidth - tlLabelW - tlRightM, From: from, To: now, Empty: empty}
	x := func(at time.Time) float64 {
		if at.Before(from) {
			at = from
		}
		if at.After(now) {
			at = now
		}
		return t.PlotX + float64(at.Sub(from))/float64(span)*t.PlotW
	}
	y := float64(tlTop)
	for _, l := range lanes {
		pts := append([]tlPoint(nil), l.Points...)
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
		t.Labels = append(t.Labels, svgLabel{Y: y + tlLaneH*0.7, Text: l.Label})
		for i, p := range pts {
			end := now
			if i+1 < len(pts) {
				end = pts[i+1].At
			}
			x0, x1 := x(p.At), x(end)
			t.Rects = append(t.Rects, svgRect{X: x0, Y: y, W: max(x1-x0, 1), H: tlLaneH, Class: l.Prefix + p.State,
				Title: fmt.Sprintf("%s: %s since %s%s", l.Label, p.State, p.At.UTC().Format(time.DateTime), p.Title)})
		}
		y += tlLaneH + tlGap
	}
	t.QuarantineLane = y
	t.Labels = append(t.Labels, svgLabel{Y: y + tlLaneH*0.7, Text: "quarantine / release"})
	for _, m := range marks {
		mx, my := x(m.At), y+tlLaneH/2
		t.Marks = append(t.Marks, svgMark{X: mx, Y: my, Class: m.Class, Title: m.Title,
			Points: fmt.Sprintf("%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f", mx, my-8, mx+7, my, mx, my+8, mx-7, my)})
	}
	y += tlLaneH + tlGap
	t.LanesH = y
	t.AxisY = y + 4
	t.Height = int(y) + tlAxisH
	layout := "15:04"
	switch {
	case span > 20*time.Hour:
		layout = "Jan 2 15:04"
	case span < 30*time.Minute:
		layout = "15:04:05" // ticks less than 5 minutes apart
	}
	const ticks = 6
	for i := 0; i <= ticks; i++ {
		at := from.Add(time.Duration(float64(span) * float64(i) / ticks))
		anchor := "middle"
		if i == ticks {
			anchor = "end"
		}
		t.Ticks = append(t.Ticks, svgTick{X: x(at), Label: at.UTC().Format(layout), Anchor: anchor})
	}
	return t
}
