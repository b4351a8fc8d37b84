package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
)

// listing is what a `get` fetched: rows for the table formats, names for
// -o name and the response message for -o json|yaml.
type listing struct {
	header, wideHeader []string
	items              []item
	// msg is the whole answer (all pages merged) for -o json|yaml.
	msg proto.Message
}

// item is one listed object.
type item struct {
	key        string
	cells      []string
	wide       []string
	name       string
	msg        proto.Message
	goneMarker string // shown in --watch when the item leaves the listing
	// sig is what --watch compares to decide the item changed: its fields
	// without the ages, which change on every poll.
	sig string
}

// signature joins the fields that make an item's sig.
func signature(fields ...any) string { return fmt.Sprint(fields...) }

type fetchFunc func(ctx context.Context) (*listing, error)

// aligner pads columns to the widest cell seen so far, so --watch rows line
// up with the table printed before them.
type aligner struct{ widths []int }

func (al *aligner) lines(rows [][]string) []string {
	for _, r := range rows {
		for i, c := range r {
			if i >= len(al.widths) {
				al.widths = append(al.widths, 0)
			}
			al.widths[i] = max(al.widths[i], utf8.RuneCountInString(c))
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", al.widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		out = append(out, b.String())
	}
	return out
}

func (it item) row(wide bool) []string {
	src := it.cells
	if wide {
		src = it.wide
	}
	r := make([]string, len(src))
	for i, c := range src {
		r[i] = cell(c)
	}
	return r
}

// printListing prints l once in format out. emptyHint is printed on stderr
// (kubectl-style "No resources found") when nothing matched.
func printListing(w, errw io.Writer, out string, l *listing, al *aligner, emptyHint string) error {
	switch out {
	case outJSON, outYAML:
		return writeProto(w, out, l.msg)
	case outName:
		for _, it := range l.items {
			fmt.Fprintln(w, it.name)
		}
	default:
		if len(l.items) == 0 {
			fmt.Fprintln(errw, emptyHint)
			return nil
		}
		wide := out == outWide
		h := l.header
		if wide {
			h = l.wideHeader
		}
		rows := [][]string{h}
		for _, it := range l.items {
			rows = append(rows, it.row(wide))
		}
		for _, line := range al.lines(rows) {
			fmt.Fprintln(w, line)
		}
	}
	if len(l.items) == 0 && out == outName {
		fmt.Fprintln(errw, emptyHint)
	}
	return nil
}

// watch prints the listing, then polls every interval and prints the items
// that changed, appeared or went away, until ctx ends (Ctrl-C: exit 0).
// With -o json each change is one line of JSON; with -o name, the name.
func (a *app) watch(ctx context.Context, c *client, out string, interval time.Duration, fetch fetchFunc, emptyHint string) error {
	w := a.opts.Stdout
	al := &aligner{}
	l, err := fetch(ctx)
	if err != nil {
		return err
	}
	if out == outJSON {
		for _, it := range l.items {
			if err := writeProtoLine(w, it.msg); err != nil {
				return err
			}
		}
	} else if err := printListing(w, a.opts.Stderr, out, l, al, emptyHint); err != nil {
		return err
	}
	headerShown := len(l.items) > 0
	prev := map[string]item{}
	for _, it := range l.items {
		prev[it.key] = it
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		l, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// a hub restart or a dropped connection: say so and keep watching
			fmt.Fprintf(a.opts.Stderr, "warning: %v (still watching)\n", c.explain(err))
			continue
		}
		changed, cur := changedItems(prev, l.items)
		prev = cur
		if len(changed) == 0 {
			continue
		}
		if err := printChanged(w, out, l, changed, al, &headerShown); err != nil {
			return err
		}
	}
}

// changedItems compares a listing's items with the previous ones (by key):
// it returns the new or changed items, then the gone ones with their gone
// marker in the last column, and the items by key for the next round.
func changedItems(prev map[string]item, items []item) (changed []item, cur map[string]item) {
	cur = map[string]item{}
	for _, it := range items {
		cur[it.key] = it
		if p, ok := prev[it.key]; !ok || p.sig != it.sig {
			changed = append(changed, it)
		}
	}
	for k, p := range prev {
		if _, ok := cur[k]; !ok {
			g := p
			g.cells = append([]string(nil), p.cells...)
			g.wide = append([]string(nil), p.wide...)
			g.cells[len(g.cells)-1] = p.goneMarker
			g.wide[len(g.wide)-1] = p.goneMarker
			changed = append(changed, g)
		}
	}
	return changed, cur
}

// printChanged prints the changed items of listing l in output format out:
// JSON lines, names, or table rows aligned by al under l's header, printed
// once (headerShown).
func printChanged(w io.Writer, out string, l *listing, changed []item, al *aligner, headerShown *bool) error {
	switch out {
	case outJSON:
		for _, it := range changed {
			if err := writeProtoLine(w, it.msg); err != nil {
				return err
			}
		}
	case outName:
		for _, it := range changed {
			fmt.Fprintln(w, it.name)
		}
	default:
		wide := out == outWide
		var rows [][]string
		if !*headerShown {
			rows = append(rows, l.header)
			if wide {
				rows[0] = l.wideHeader
			}
			*headerShown = true
		}
		for _, it := range changed {
			rows = append(rows, it.row(wide))
		}
		for _, line := range al.lines(rows) {
			fmt.Fprintln(w, line)
		}
	}
	return nil
}
