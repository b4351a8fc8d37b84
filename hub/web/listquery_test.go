package web

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestListsSelectorAndSort: the operations, commands, holds and events
// lists filter by a selector in the CLI's syntax (the rows of the devices
// it selects; a bad one is 400 with the device list's message), and the
// operations, commands and holds lists sort on the server by device name
// without ?sort and by any column with it (a column head links to it; an
// unknown column is 400 naming the columns).
func TestListsSelectorAndSort(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	// Three reboots and three quarantines (commands and holds), started in
	// an order that is not the names' order.
	if w := do(t, h, "POST", "/operations", "ops-write", "", url.Values{"kind": {"REBOOT"}, "devices": {"a-avail-2,a-faulted-1,a-avail-1"}, "reason": {"firmware"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("start reboots: %d %s", w.Code, w.Body.String())
	}
	for _, name := range []string{"a-avail-2", "a-faulted-1", "a-avail-1"} {
		id := deviceID(t, e, name)
		if w := do(t, h, "POST", "/devices/"+id+"/quarantine", "ops-write", "", url.Values{"reason": {"rack r4 " + name}}, nil); w.Code != http.StatusSeeOther {
			t.Fatalf("quarantine %s: %d %s", name, w.Code, w.Body.String())
		}
	}
	names := []string{"a-avail-1", "a-avail-2", "a-faulted-1"}
	rev := []string{"a-faulted-1", "a-avail-2", "a-avail-1"}
	for _, list := range []string{"/operations", "/commands", "/holds"} {
		t.Run(list, func(t *testing.T) {
			page := getPage(t, h, list)
			inOrder(t, list, page, names)
			if !strings.Contains(page, `href="`+html.EscapeString(list+"?sort=-name")+`">device ▲</a>`) {
				t.Errorf("%s: the device head does not link to the descending order: %.2000s", list, page)
			}
			inOrder(t, list+"?sort=-name", getPage(t, h, list+"?sort=-name"), rev)
			// Sorted by why (the quarantine's reason names the device) on the
			// lists that show it.
			if list != "/operations" {
				inOrder(t, list+"?sort=-why", getPage(t, h, list+"?sort=-why"), rev)
			}
			sel := getPage(t, h, list+"?selector="+url.QueryEscape("site=alpha,name=a-avail-*"))
			inOrder(t, list+" selector", sel, names[:2])
			if strings.Contains(sel, ">a-faulted-1<") {
				t.Errorf("%s: the selector name=a-avail-* lists a-faulted-1", list)
			}
			if !strings.Contains(sel, `value="site=alpha,name=a-avail-*"`) {
				t.Errorf("%s: the selector is not kept in its field", list)
			}
			if w := do(t, h, "GET", list+"?sort=colour", "ops-read", "", nil, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "is not a column: ") {
				t.Errorf("%s?sort=colour: %d %.300s", list, w.Code, w.Body.String())
			}
		})
	}
	// A bad selector: 400 with the device list's (and the CLI's) message.
	for _, bad := range []string{"status=sideways", "site=Not A Site", "status"} {
		var f listFilter
		perr := parseSelectorFilter(&f, bad)
		if perr == nil {
			t.Fatalf("selector %q parses", bad)
		}
		for _, list := range []string{"/devices", "/operations", "/commands", "/holds", "/events"} {
			w := do(t, h, "GET", list+"?selector="+url.QueryEscape(bad), "ops-read", "", nil, nil)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), html.EscapeString(perr.Error())) {
				t.Errorf("%s?selector=%s: %d, want 400 with %q: %.300s", list, bad, w.Code, perr.Error(), w.Body.String())
			}
		}
	}
	// Events: only the selected devices' changes.
	ev := getPage(t, h, "/events?selector="+url.QueryEscape("name=a-avail-1"))
	if !strings.Contains(ev, `data-device="`+deviceID(t, e, "a-avail-1")+`"`) {
		t.Errorf("/events with a selector: no event of a-avail-1: %.2000s", ev)
	}
	for _, other := range []string{"a-avail-2", "a-faulted-1"} {
		if strings.Contains(ev, `data-device="`+deviceID(t, e, other)+`"`) {
			t.Errorf("/events?selector=name=a-avail-1 shows an event of %s", other)
		}
	}
}

func getPage(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	w := do(t, h, "GET", path, "ops-read", "", nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %.500s", path, w.Code, w.Body.String())
	}
	return w.Body.String()
}

// inOrder fails unless each of names is a link text of page, in this order.
func inOrder(t *testing.T, what, page string, names []string) {
	t.Helper()
	last := -1
	for _, n := range names {
		i := strings.Index(page, ">"+n+"</a>")
		if i < 0 {
			t.Errorf("%s: %s is not listed", what, n)
			return
		}
		if i < last {
			t.Errorf("%s: %s comes before the device listed before it; want the order %v", what, n, names)
		}
		last = i
	}
}

func deviceID(t *testing.T, e *env, name string) string {
	t.Helper()
	var id string
	if err := e.st.Pool().QueryRow(t.Context(), `SELECT id::text FROM devices WHERE name = $1`, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
