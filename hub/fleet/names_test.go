package fleet_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// namedFleet reports named devices at two sites: gpu-001..gpu-003 and
// "shared" at site-a, "shared" and "edge_1" at site-b, and a removed
// "ghost" at site-b. It returns the server, the database URL and name →
// ids ("site/name" for shared).
func namedFleet(t *testing.T) (*fleet.Server, string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, url, _, log := newStoreWithDevice(t)
	ids := map[string]string{}
	report := func(site string, seq uint64, names ...string) {
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "r"})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		var ups []store.DeviceUpdate
		for _, n := range names {
			id := uuid.NewString()
			key := n
			if n == "shared" {
				key = site + "/" + n
			}
			ids[key] = id
			ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: now, Facts: &store.Facts{Name: n},
				Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}})
		}
		if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: seq, Devices: ups}); err != nil {
			t.Fatal(err)
		}
	}
	report("site-a", 2, "gpu-001", "gpu-002", "gpu-003", "shared")
	report("site-b", 1, "shared", "edge_1", "ghost")
	pgtest.MustExec(t, url, `UPDATE devices SET removed = true, removed_at = now() WHERE name = 'ghost'`)
	return fleet.NewServer(st, func(context.Context) string { return "ops-alice" }, log), url, ids
}

func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

// TestDevicesByName: every RPC that names a device takes its name, with the
// site when the name is not unique; ambiguity and unknown names say why.
func TestDevicesByName(t *testing.T) {
	ctx := context.Background()
	srv, _, ids := namedFleet(t)

	t.Run("get by name", func(t *testing.T) {
		tests := []struct {
			name, device, site, want string
		}{
			{"unique name", "gpu-002", "", ids["gpu-002"]},
			{"unique name with its site", "gpu-002", "site-a", ids["gpu-002"]},
			{"shared name with site-a", "shared", "site-a", ids["site-a/shared"]},
			{"shared name with site-b", "shared", "site-b", ids["site-b/shared"]},
			{"name with LIKE metacharacter", "edge_1", "", ids["edge_1"]},
			{"removed device still answers to its name", "ghost", "", ids["ghost"]},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				r, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: tc.device, Site: tc.site})
				if err != nil {
					t.Fatal(err)
				}
				if r.GetDevice().GetDeviceId() != tc.want {
					t.Fatalf("got %s (%s), want %s", r.GetDevice().GetDeviceId(), r.GetDevice().GetName(), tc.want)
				}
			})
		}
	})

	t.Run("ambiguous name lists the candidates", func(t *testing.T) {
		_, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "shared"})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("code %v (%v), want InvalidArgument", status.Code(err), err)
		}
		ei := errorInfo(err)
		if ei == nil || ei.GetReason() != fleet.ReasonDeviceNameAmbiguous || ei.GetDomain() != grpcerr.Domain {
			t.Fatalf("error info %v", ei)
		}
		want := "site-a/" + ids["site-a/shared"] + ",site-b/" + ids["site-b/shared"]
		if got := ei.GetMetadata()["candidates"]; got != want {
			t.Fatalf("candidates %q, want %q", got, want)
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, "give the site") || !strings.Contains(msg, ids["site-b/shared"]) {
			t.Fatalf("message %q", msg)
		}
	})

	t.Run("unknown name suggests similar ones", func(t *testing.T) {
		_, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-0002"})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("code %v (%v), want NotFound", status.Code(err), err)
		}
		ei := errorInfo(err)
		if ei == nil || ei.GetReason() != grpcerr.ReasonNotFound || ei.GetMetadata()["suggestions"] != "gpu-002,gpu-001,gpu-003" {
			t.Fatalf("error info %v", ei)
		}
		if msg := status.Convert(err).Message(); msg != `no device named "gpu-0002"; did you mean gpu-002, gpu-001, gpu-003?` {
			t.Fatalf("message %q", msg)
		}
		_, err = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-001", Site: "site-b"})
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `at site "site-b"`) {
			t.Fatalf("name at the wrong site: %v", err)
		}
	})

	t.Run("bad references", func(t *testing.T) {
		tests := []struct {
			name string
			req  *ironlinkv1.GetDeviceRequest
			want codes.Code
		}{
			{"both id and name", &ironlinkv1.GetDeviceRequest{DeviceId: ids["gpu-001"], DeviceName: "gpu-001"}, codes.InvalidArgument},
			{"neither", &ironlinkv1.GetDeviceRequest{}, codes.InvalidArgument},
			{"bad site", &ironlinkv1.GetDeviceRequest{DeviceName: "gpu-001", Site: "No Such"}, codes.InvalidArgument},
			{"name too long", &ironlinkv1.GetDeviceRequest{DeviceName: strings.Repeat("n", 300)}, codes.InvalidArgument},
			{"id at another site", &ironlinkv1.GetDeviceRequest{DeviceId: ids["gpu-001"], Site: "site-b"}, codes.NotFound},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := srv.GetDevice(ctx, tc.req); status.Code(err) != tc.want {
					t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.want)
				}
			})
		}
	})

	t.Run("quarantine, release and list commands by name", func(t *testing.T) {
		q, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceName: "shared", Site: "site-b", Reason: "Xid 79"})
		if err != nil {
			t.Fatal(err)
		}
		if q.GetCommand().GetDeviceId() != ids["site-b/shared"] {
			t.Fatalf("quarantined %s", q.GetCommand().GetDeviceId())
		}
		if _, err := srv.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceName: "shared", Reason: "fixed"}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("release of an ambiguous name: %v", err)
		}
		if _, err := srv.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceName: "shared", Site: "site-b", Reason: "fixed"}); err != nil {
			t.Fatal(err)
		}
		l, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceName: "shared", Site: "site-b"})
		if err != nil || len(l.GetCommands()) != 2 {
			t.Fatalf("commands %v %v", l.GetCommands(), err)
		}
		if _, err := srv.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{DeviceName: "nothing-like-it"}); status.Code(err) != codes.NotFound {
			t.Fatalf("commands of an unknown name: %v", err)
		}
	})
}

// TestListDevicesByName filters by name prefix and shell-style pattern.
func TestListDevicesByName(t *testing.T) {
	ctx := context.Background()
	srv, _, _ := namedFleet(t)
	tests := []struct {
		name            string
		prefix, pattern string
		removed         bool
		want            []string
		code            codes.Code
	}{
		{name: "prefix", prefix: "gpu-00", want: []string{"gpu-001", "gpu-002", "gpu-003"}},
		{name: "prefix is literal", prefix: "gpu_", want: nil},
		{name: "pattern with star", pattern: "gpu-*3", want: []string{"gpu-003"}},
		{name: "pattern with question mark", pattern: "edge?1", want: []string{"edge_1"}},
		{name: "escaped wildcard", pattern: `edge\?1`, want: nil},
		{name: "pattern without wildcards is exact", pattern: "shared", want: []string{"shared", "shared"}},
		{name: "prefix and pattern together", prefix: "gpu", pattern: "*2", want: []string{"gpu-002"}},
		{name: "removed only with include_removed", pattern: "gh*", want: nil},
		{name: "removed with include_removed", pattern: "gh*", removed: true, want: []string{"ghost"}},
		{name: "trailing backslash", pattern: `gpu\`, code: codes.InvalidArgument},
		{name: "pattern too long", pattern: strings.Repeat("*", 300), code: codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{NamePrefix: tc.prefix, NamePattern: tc.pattern, IncludeRemoved: tc.removed})
			if status.Code(err) != tc.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.code)
			}
			var got []string
			for _, d := range r.GetDevices() {
				got = append(got, d.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("names %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		candidates []string
		want       []string
	}{
		{"one typo; three edits is too far", "nod-007", []string{"node-007", "node-008", "node-070", "rack-1"}, []string{"node-007", "node-008"}},
		{"case only", "Node-7", []string{"node-7", "node-8"}, []string{"node-7", "node-8"}},
		{"nothing close", "xyz", []string{"node-007"}, []string{}},
		{"never itself", "a", []string{"a", "b"}, []string{"b"}},
		{"nearest first, at most three", "gpu-1", []string{"gpu-11", "gpu-1x", "gpu-2", "gpu-21", "gpu-3"}, []string{"gpu-11", "gpu-1x", "gpu-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fleet.Suggest(tc.in, tc.candidates, 3); !slices.Equal(got, tc.want) {
				t.Fatalf("Suggest(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// TestListDevicesByIDPrefix resolves the short ids lists show: a prefix of
// any length up to the whole id, hyphens where the UUID has them, either
// case, selects exactly the devices whose id starts with it; anything that
// cannot start a UUID is InvalidArgument naming id_prefix.
func TestListDevicesByIDPrefix(t *testing.T) {
	ctx := context.Background()
	srv, _, ids := namedFleet(t)
	all := map[string]bool{}
	for _, id := range ids {
		all[id] = true
	}
	list := func(t *testing.T, prefix string, removed bool) []string {
		t.Helper()
		r, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{IdPrefix: prefix, IncludeRemoved: removed, PageSize: 1000})
		if err != nil {
			t.Fatalf("id_prefix %q: %v", prefix, err)
		}
		var got []string
		for _, d := range r.GetDevices() {
			got = append(got, d.GetDeviceId())
		}
		return got
	}
	id := ids["gpu-002"]
	for _, p := range []string{id[:4], id[:8], id[:9], id[:11], strings.ToUpper(id[:13]), id[:30], id} {
		var want []string
		for x := range all {
			if strings.HasPrefix(x, strings.ToLower(p)) {
				want = append(want, x)
			}
		}
		slices.Sort(want)
		if got := list(t, p, true); !slices.Equal(got, want) || !slices.Contains(got, id) {
			t.Fatalf("id_prefix %q: %v, want %v", p, got, want)
		}
	}
	// A prefix no device has: the range holds nothing.
	absent := ""
	for _, c := range "0123456789abcdef" {
		p := string(c) + id[1:8]
		if !slices.ContainsFunc(slices.Collect(maps.Keys(all)), func(x string) bool { return strings.HasPrefix(x, p) }) {
			absent = p
			break
		}
	}
	if got := list(t, absent, true); len(got) != 0 {
		t.Fatalf("id_prefix %q no id has: %v", absent, got)
	}
	for _, bad := range []string{"xyz1", id[:8] + "4", id[:7] + "-", id + "0", "ce7c\x00"} {
		_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{IdPrefix: bad})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "id_prefix") {
			t.Fatalf("id_prefix %q: %v, want InvalidArgument naming id_prefix", bad, err)
		}
	}
	_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{IdPrefix: id[:8], AsOf: timestamppb.Now()})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("id_prefix with as_of: %v", err)
	}
}
