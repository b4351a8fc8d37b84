package pagetoken_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/operations/vault"
	"github.com/ironlink/ironlink/hub/pagetoken"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// TestHostilePageTokens sends altered and forged page tokens to every List RPC
// that pages: nothing answers other than OK or InvalidArgument, and a
// site-bound operator paging with any token sees only its own site. A
// forged ListPolicyDecisions cursor above 2^31-1 answered Unavailable
// "database unavailable; retry" (its SQL parameter was typed integer).
func TestHostilePageTokens(t *testing.T) {
	ctx := context.Background()
	log := testlog.New(t)
	st, _ := storetest.New(t, log)
	now := time.Now().UTC()
	siteOf := map[string]string{}
	for _, site := range []string{"site-a", "site-b"} {
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "r", Capabilities: []string{operations.Capability}})
		if err != nil {
			t.Fatal(err)
		}
		var ups []store.DeviceUpdate
		for i := 0; i < 6; i++ {
			id := uuid.NewString()
			siteOf[id] = site
			ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: now,
				Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}})
		}
		if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
			t.Fatal(err)
		}
	}
	fl := fleet.NewServer(st, nil, log)
	ops := operations.NewServer(st, operations.Config{Vault: vault.New("r", 0)}, log)
	pol := policyapi.NewServer(st, policy.Static(policy.Disabled()), nil, log)
	for id := range siteOf {
		if _, err := fl.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: id, Reason: "paging"}); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{id}, Reason: "paging", Force: true}); err != nil {
			t.Fatal(err)
		}
	}

	admin := authn.NewContext(ctx, auth.Identity{ClientID: "admin"})
	bound := authn.NewContext(ctx, auth.Identity{ClientID: "ops-a", Sites: []string{"site-a"}})

	type lister struct {
		name string
		req  func(tok string) proto.Message
		call func(ctx context.Context, m proto.Message) (next string, sites []string, err error)
	}
	listers := []lister{
		{"ListDevices", func(tok string) proto.Message { return &ironlinkv1.ListDevicesRequest{PageSize: 2, PageToken: tok} },
			func(ctx context.Context, m proto.Message) (string, []string, error) {
				r, err := fl.ListDevices(ctx, m.(*ironlinkv1.ListDevicesRequest))
				var s []string
				for _, d := range r.GetDevices() {
					s = append(s, d.GetSite())
				}
				return r.GetNextPageToken(), s, err
			}},
		{"ListCommands", func(tok string) proto.Message { return &ironlinkv1.ListCommandsRequest{PageSize: 2, PageToken: tok} },
			func(ctx context.Context, m proto.Message) (string, []string, error) {
				r, err := fl.ListCommands(ctx, m.(*ironlinkv1.ListCommandsRequest))
				var s []string
				for _, c := range r.GetCommands() {
					s = append(s, siteOf[c.GetDeviceId()])
				}
				return r.GetNextPageToken(), s, err
			}},
		{"ListOperations", func(tok string) proto.Message { return &ironlinkv1.ListOperationsRequest{PageSize: 2, PageToken: tok} },
			func(ctx context.Context, m proto.Message) (string, []string, error) {
				r, err := ops.ListOperations(ctx, m.(*ironlinkv1.ListOperationsRequest))
				var s []string
				for _, o := range r.GetOperations() {
					s = append(s, o.GetSite())
				}
				return r.GetNextPageToken(), s, err
			}},
		{"ListPolicyDecisions", func(tok string) proto.Message {
			return &ironlinkv1.ListPolicyDecisionsRequest{PageSize: 2, PageToken: tok}
		},
			func(ctx context.Context, m proto.Message) (string, []string, error) {
				r, err := pol.ListPolicyDecisions(ctx, m.(*ironlinkv1.ListPolicyDecisionsRequest))
				var s []string
				for _, d := range r.GetDecisions() {
					s = append(s, d.GetSite())
				}
				return r.GetNextPageToken(), s, err
			}},
		{"ListPendingActions", func(tok string) proto.Message {
			return &ironlinkv1.ListPendingActionsRequest{PageSize: 2, PageToken: tok}
		},
			func(ctx context.Context, m proto.Message) (string, []string, error) {
				r, err := pol.ListPendingActions(ctx, m.(*ironlinkv1.ListPendingActionsRequest))
				var s []string
				for _, p := range r.GetActions() {
					s = append(s, p.GetSite())
				}
				return r.GetNextPageToken(), s, err
			}},
	}
	uid := uuid.NewString()
	cursors := []string{"", "x", "-1", "0", "1", "9223372036854775807", "9223372036854775808", "99999999999999999999999",
		"\x00", "\xff\xfe", strings.Repeat("9", 5000), uid, "{" + uid + "}", "urn:uuid:" + uid, strings.ToUpper(uid),
		"0000-01-01T00:00:00Z|" + uid, "0001-01-01T00:00:00Z|" + uid, "9999-12-31T23:59:59.999999999-23:59|" + uid,
		"2026-01-01T00:00:00Z|", "|" + uid, "2026-01-01T00:00:00Z|x", "2026-01-01T00:00:00.123456789Z|" + uid + "|more"}
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if c := status.Code(err); c != codes.OK && c != codes.InvalidArgument {
			t.Errorf("%s: %v", what, err)
		}
	}
	// The same token with a site filter added: InvalidArgument naming
	// page_token, on every RPC.
	withSite := map[string]func(tok string) proto.Message{
		"ListDevices":  func(tok string) proto.Message { return &ironlinkv1.ListDevicesRequest{Site: "site-a", PageToken: tok} },
		"ListCommands": func(tok string) proto.Message { return &ironlinkv1.ListCommandsRequest{Site: "site-a", PageToken: tok} },
		"ListOperations": func(tok string) proto.Message {
			return &ironlinkv1.ListOperationsRequest{Site: "site-a", PageToken: tok}
		},
		"ListPolicyDecisions": func(tok string) proto.Message {
			return &ironlinkv1.ListPolicyDecisionsRequest{Site: "site-a", PageToken: tok}
		},
		"ListPendingActions": func(tok string) proto.Message {
			return &ironlinkv1.ListPendingActionsRequest{Site: "site-a", PageToken: tok}
		},
	}
	for _, l := range listers {
		tok := pagetoken.Encode(l.req(""), "1")
		if l.name == "ListDevices" {
			tok = pagetoken.Encode(l.req(""), uuid.NewString())
		}
		if l.name == "ListOperations" {
			tok = pagetoken.Encode(l.req(""), "2026-01-01T00:00:00Z|"+uuid.NewString())
		}
		for _, c := range []context.Context{admin, bound} {
			_, _, err := l.call(c, withSite[l.name](tok))
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "other filters") {
				t.Errorf("%s: a token sent with another site filter: %v", l.name, err)
			}
		}
	}
	// A forged token for a site that does not exist: NotFound, as without
	// a token (a typo in the site never looks like an empty site).
	typo := map[string]proto.Message{
		"ListDevices":         &ironlinkv1.ListDevicesRequest{Site: "site-typo"},
		"ListCommands":        &ironlinkv1.ListCommandsRequest{Site: "site-typo"},
		"ListOperations":      &ironlinkv1.ListOperationsRequest{Site: "site-typo"},
		"ListPolicyDecisions": &ironlinkv1.ListPolicyDecisionsRequest{Site: "site-typo"},
		"ListPendingActions":  &ironlinkv1.ListPendingActionsRequest{Site: "site-typo"},
	}
	for _, l := range listers {
		m, cur := typo[l.name], "1"
		switch l.name {
		case "ListDevices":
			cur = uuid.NewString()
		case "ListOperations":
			cur = "2026-01-01T00:00:00Z|" + uuid.NewString()
		}
		r := m.ProtoReflect()
		r.Set(r.Descriptor().Fields().ByName("page_token"), protoreflect.ValueOfString(pagetoken.Encode(m, cur)))
		if _, _, err := l.call(admin, m); status.Code(err) != codes.NotFound {
			t.Errorf("%s: a forged token for an unknown site: %v, want NotFound", l.name, err)
		}
	}
	for _, l := range listers {
		t.Run(l.name, func(t *testing.T) {
			// A real token, then altered.
			next, _, err := l.call(admin, l.req(""))
			if err != nil {
				t.Fatal(err)
			}
			var toks []string
			if next != "" {
				raw, _ := base64.RawURLEncoding.DecodeString(next)
				for i := range raw {
					b := []byte(string(raw))
					b[i] ^= 0xff
					toks = append(toks, base64.RawURLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(raw[:i]))
				}
				toks = append(toks, next+"=", next+"A", next[:len(next)-1], strings.ToUpper(next))
			}
			toks = append(toks, "!!", "====", "AQ==", strings.Repeat("A", 1<<20), "\x00", "AQAAAAAAAAAAAAAA")
			for _, cur := range cursors {
				toks = append(toks, pagetoken.Encode(l.req(""), cur))
				toks = append(toks, base64.RawURLEncoding.EncodeToString(append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, cur...)))
			}
			for i, tok := range toks {
				for _, c := range []struct {
					name string
					ctx  context.Context
				}{{"admin", admin}, {"bound", bound}} {
					_, sites, err := l.call(c.ctx, l.req(tok))
					check(t, fmt.Sprintf("%s token %d %q", c.name, i, tok[:min(len(tok), 40)]), err)
					if c.name == "bound" {
						for _, s := range sites {
							if s != "site-a" {
								t.Errorf("bound operator with token %d got an item of %s", i, s)
							}
						}
					}
				}
			}
			// The bound operator pages with the admin's token: only its site.
			for tok := next; tok != ""; {
				var sites []string
				tok, sites, err = l.call(bound, l.req(tok))
				check(t, "bound with admin token", err)
				for _, s := range sites {
					if s != "site-a" {
						t.Errorf("bound operator paging with the admin's token got an item of %s", s)
					}
				}
			}
		})
	}
}
