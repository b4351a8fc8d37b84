package web

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestListSortAndSelector: the device list is in name order by default,
// any column sorts it both ways with keyset pages that neither repeat nor
// skip a device, and the selector filter takes the CLI's syntax (and its
// messages for bad input).
func TestListSortAndSelector(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pages := func(t *testing.T, query string) []listRow {
		t.Helper()
		vals, _ := url.ParseQuery(query)
		f, err := parseListFilter(vals)
		if err != nil {
			t.Fatal(err)
		}
		f.Limit = 3
		var got []listRow
		for {
			rows, more, err := listDevices(ctx, e.st.Pool(), f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			if !more {
				return got
			}
			f.After = rows[len(rows)-1].ID
		}
	}
	names := func(rows []listRow) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Name)
		}
		return out
	}
	byName := names(pages(t, ""))
	if len(byName) != 12 || !slices.IsSorted(byName) {
		t.Fatalf("default order: %v, want the 12 names sorted", byName)
	}
	if desc := names(pages(t, "sort=-name")); !slices.Equal(desc, reversed(byName)) {
		t.Fatalf("sort=-name: %v", desc)
	}
	for _, col := range []string{"site", "status", "why", "since", "quarantine", "-status"} {
		rows := pages(t, "sort="+col)
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r.ID] {
				t.Fatalf("sort=%s repeats %s", col, r.Name)
			}
			seen[r.ID] = true
		}
		if len(seen) != 12 {
			t.Fatalf("sort=%s pages show %d devices, want 12", col, len(seen))
		}
	}
	sel := names(pages(t, "selector="+url.QueryEscape("site=alpha,status=faulted|maintenance,name=a-*")))
	if !slices.Equal(sel, []string{"a-faulted-1", "a-faulted-2", "a-maint"}) {
		t.Fatalf("selector: %v", sel)
	}
	// A label term filters by the device's effective labels (the
	// satellite's, here set straight in facts as the link stores them).
	if _, err := e.st.Pool().Exec(ctx, `UPDATE devices SET facts = jsonb_set(facts, '{labels}', '{"rack": "r12"}')
		WHERE name IN ('a-faulted-1', 'a-maint')`); err != nil {
		t.Fatal(err)
	}
	if got := names(pages(t, "selector="+url.QueryEscape("rack=r12"))); !slices.Equal(got, []string{"a-faulted-1", "a-maint"}) {
		t.Fatalf("selector rack=r12: %v", got)
	}
	if got := names(pages(t, "selector="+url.QueryEscape("rack=r12,status=faulted"))); !slices.Equal(got, []string{"a-faulted-1"}) {
		t.Fatalf("selector rack=r12,status=faulted: %v", got)
	}
	h := e.server(t, proxyCfg).Handler()
	for q, want := range map[string]string{
		"selector=bogus":        `selector term &#34;bogus&#34;: want key=value`,
		"selector=status=happy": `selector: unknown status &#34;happy&#34;`,
		"sort=color":            `sort &#34;color&#34; is not a column`,
	} {
		w := do(t, h, "GET", "/devices?"+q, "ops-read", "", nil, nil)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) {
			t.Errorf("%s: %d, want 400 with %q in %s", q, w.Code, want, w.Body.String())
		}
	}
	// Column heads link to their sort; the sorted one flips to descending.
	w := do(t, h, "GET", "/devices?sort=site", "ops-read", "", nil, nil)
	if !strings.Contains(w.Body.String(), `href="/devices?sort=-site"`) || !strings.Contains(w.Body.String(), `href="/devices?sort=status"`) {
		t.Errorf("sort links missing in %s", w.Body.String())
	}
}

func reversed(s []string) []string {
	c := slices.Clone(s)
	slices.Reverse(c)
	return c
}
