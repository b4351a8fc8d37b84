package policy

import (
	"slices"
	"time"
)

// In reports whether t lies in an occurrence of w for device: w covers the
// device (Devices empty or listing it) and t ∈ [Start + k·Every, End +
// k·Every) for some whole k ≥ 0 (k = 0 only when Every is 0). Start is
// inclusive, End exclusive.
func (w Window) In(device string, t time.Time) bool {
	if len(w.Devices) > 0 && !slices.Contains(w.Devices, device) {
		return false
	}
	if t.Before(w.Start) {
		return false
	}
	off := t.Sub(w.Start)
	if w.Every > 0 {
		off %= w.Every
	}
	return off < w.End.Sub(w.Start)
}

// windowAt returns the first of ws that contains t for device.
func windowAt(ws []Window, device string, t time.Time) (Window, bool) {
	for _, w := range ws {
		if w.In(device, t) {
			return w, true
		}
	}
	return Window{}, false
}

// ActiveWindows returns the windows of ws in force at t for device (every
// device when device is "").
func ActiveWindows(ws []Window, device string, t time.Time) []Window {
	var out []Window
	for _, w := range ws {
		d := device
		if d == "" && len(w.Devices) > 0 {
			d = w.Devices[0]
		}
		if w.In(d, t) {
			out = append(out, w)
		}
	}
	return out
}

// NeverOpens reports whether w cannot open at or after now: a window
// without recurrence whose end is not after now.
func (w Window) NeverOpens(now time.Time) bool {
	return w.Every == 0 && !w.End.After(now)
}
