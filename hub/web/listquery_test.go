package web

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
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
	seedLists(t, e, h)
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

// seedLists starts three reboots and three quarantines (commands and
// holds), in an order that is not the names' order.
func seedLists(t *testing.T, e *env, h http.Handler) {
	t.Helper()
	if w := do(t, h, "POST", "/operations", "ops-write", "", url.Values{"kind": {"REBOOT"}, "devices": {"a-avail-2,a-faulted-1,a-avail-1"}, "reason": {"firmware"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("start reboots: %d %s", w.Code, w.Body.String())
	}
	for _, name := range []string{"a-avail-2", "a-faulted-1", "a-avail-1"} {
		id := deviceID(t, e, name)
		if w := do(t, h, "POST", "/devices/"+id+"/quarantine", "ops-write", "", url.Values{"reason": {"rack r4 " + name}}, nil); w.Code != http.StatusSeeOther {
			t.Fatalf("quarantine %s: %d %s", name, w.Code, w.Body.String())
		}
	}
}

// TestOperationAndCommandListsMatchTheAPI: the operations and commands
// lists, read by the view itself to sort by any column, list exactly the
// rows OperationService.ListOperations and FleetService.ListCommands list
// for the same filters.
func TestOperationAndCommandListsMatchTheAPI(t *testing.T) {
	e := newEnv(t)
	v := consoleView(t, e)
	h := v.Handler()
	seedLists(t, e, h)
	// One more operation, on beta, and a cancelled one.
	if w := do(t, h, "POST", "/operations", "ops-write", "", url.Values{"kind": {"POWER_OFF"}, "devices": {"a-maint"}, "reason": {"move"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("start power off: %d %s", w.Code, w.Body.String())
	} else if w := do(t, h, "POST", w.Header().Get("Location")+"/cancel", "ops-write", "", url.Values{"reason": {"not now"}}, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", w.Code, w.Body.String())
	}
	ctx := apiContext(t.Context(), Identity{ClientID: "ops-read"})
	opRows := regexp.MustCompile(`<tr data-id="([0-9a-f-]{36})"`)
	for _, tc := range []struct {
		query string
		api   *ironlinkv1.ListOperationsRequest
	}{
		{"", &ironlinkv1.ListOperationsRequest{}},
		{"site=alpha", &ironlinkv1.ListOperationsRequest{Site: "alpha"}},
		{"kind=reboot", &ironlinkv1.ListOperationsRequest{Kinds: []ironlinkv1.OperationKind{ironlinkv1.OperationKind_OPERATION_KIND_REBOOT}}},
		{"state=CANCELLED", &ironlinkv1.ListOperationsRequest{States: []ironlinkv1.OperationState{ironlinkv1.OperationState_OPERATION_STATE_CANCELLED}}},
		{"device=a-avail-1", &ironlinkv1.ListOperationsRequest{Device: "a-avail-1"}},
	} {
		resp, err := v.ops.ListOperations(ctx, tc.api)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, o := range resp.GetOperations() {
			want = append(want, o.GetOperationId())
		}
		if len(want) == 0 {
			t.Fatalf("ListOperations %v lists nothing: the case tests nothing", tc.api)
		}
		if got := matches(opRows, getPage(t, h, "/operations?"+tc.query)); !sameSet(got, want) {
			t.Errorf("/operations?%s lists %v, ListOperations %v", tc.query, got, want)
		}
	}
	cmdRows := regexp.MustCompile(`<tr data-command="([0-9a-f-]{36})"`)
	for _, tc := range []struct {
		query string
		api   *ironlinkv1.ListCommandsRequest
	}{
		{"", &ironlinkv1.ListCommandsRequest{}},
		{"site=alpha", &ironlinkv1.ListCommandsRequest{Site: "alpha"}},
		{"state=PENDING", &ironlinkv1.ListCommandsRequest{States: []ironlinkv1.CommandState{ironlinkv1.CommandState_COMMAND_STATE_PENDING}}},
		{"device=a-avail-1", &ironlinkv1.ListCommandsRequest{DeviceName: "a-avail-1"}},
	} {
		resp, err := e.fleet.ListCommands(ctx, tc.api)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, c := range resp.GetCommands() {
			want = append(want, c.GetCommandId())
		}
		if len(want) == 0 {
			t.Fatalf("ListCommands %v lists nothing: the case tests nothing", tc.api)
		}
		if got := matches(cmdRows, getPage(t, h, "/commands?"+tc.query)); !sameSet(got, want) {
			t.Errorf("/commands?%s lists %v, ListCommands %v", tc.query, got, want)
		}
	}
}

func matches(re *regexp.Regexp, page string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestParseOffset: ?offset= takes plain digits within 0-maxListOffset; a
// sign, a space or anything else is refused rather than read leniently.
func TestParseOffset(t *testing.T) {
	for v, want := range map[string]int{"": 0, "0": 0, "100": 100} {
		if got, err := parseOffset(v); err != nil || got != want {
			t.Errorf("parseOffset(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"+5", "-1", " 5", "5x", "1e3", "99999999999999999999"} {
		if got, err := parseOffset(v); err == nil {
			t.Errorf("parseOffset(%q) = %d, want an error", v, got)
		}
	}
}
