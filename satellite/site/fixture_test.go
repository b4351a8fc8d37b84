package site_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/placement"
	"github.com/ironlink/ironlink/satellite/site"
)

// The fixture keeps the promises of the interfaces: writes are idempotent
// (a repeated one changes nothing), unknown ids give the not-found errors,
// injected failures happen the number of times asked and are recorded.
func TestFixtureKeepsTheSeamsPromises(t *testing.T) {
	ctx := context.Background()
	f := site.NewFixture()
	f.PutNode(ironic.Node{UUID: "n1", ProvisionState: "available"})
	f.PutProvider("n1")
	const tr = "CUSTOM_X"

	for range 2 {
		if err := f.AddTrait(ctx, "n1", tr); err != nil {
			t.Fatal(err)
		}
		if _, err := f.SetProviderTrait(ctx, "n1", tr, true); err != nil {
			t.Fatal(err)
		}
		if err := f.EnsureTrait(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(f.Writes()); got != 2 {
		t.Errorf("two rounds of the same writes changed the site %d times (%v), want 2", got, f.Writes())
	}
	if n, _ := f.Node("n1"); !n.HasTrait(tr) {
		t.Errorf("node traits %v", n.Traits)
	}
	if set, defined, _ := f.ProvidersWithTrait(ctx, tr); !defined || !set["n1"] {
		t.Errorf("providers with %s: %v defined %v", tr, set, defined)
	}
	for range 2 {
		if err := f.RemoveTrait(ctx, "n1", tr); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Changes("n1"); got != 3 {
		t.Errorf("node/provider n1 changed %d times, want 3 (add, provider add, remove)", got)
	}

	if _, err := f.GetNode(ctx, "nx"); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("GetNode unknown: %v", err)
	}
	if err := f.AddTrait(ctx, "nx", tr); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("AddTrait unknown: %v", err)
	}
	if _, err := f.SetProviderTrait(ctx, "nx", tr, false); !errors.Is(err, placement.ErrProviderNotFound) {
		t.Errorf("SetProviderTrait unknown: %v", err)
	}
	if _, err := f.GetServer(ctx, "sx"); !errors.Is(err, nova.ErrServerNotFound) {
		t.Errorf("GetServer unknown: %v", err)
	}
	f.SetServers(nova.Server{ID: "s1", Status: "ACTIVE"}, nova.Server{ID: "s2", Status: "DELETED"})
	if ss, _ := f.ListServers(ctx); len(ss) != 1 || ss[0].ID != "s1" {
		t.Errorf("ListServers lists %v, want the live s1 only", ss)
	}
	if s, err := f.GetServer(ctx, "s2"); err != nil || !s.Deleted() {
		t.Errorf("GetServer of a deleted record: %v %v", s, err)
	}

	boom := errors.New("boom")
	f.ResetCalls()
	f.Fail(site.MethodListNodes, "", boom, 2)
	for i, want := range []error{boom, boom, nil} {
		if _, err := f.ListNodes(ctx); !errors.Is(err, want) && err != want {
			t.Errorf("ListNodes #%d: %v, want %v", i+1, err, want)
		}
	}
	calls := f.Calls()
	if len(calls) != 3 || calls[0].Err != boom || calls[2].Err != nil {
		t.Errorf("recorded %v", calls)
	}
	f.Fail(site.MethodAddTrait, "n1", boom, -1)
	for range 3 {
		if err := f.AddTrait(ctx, "n1", tr); err != boom {
			t.Errorf("AddTrait with a standing failure: %v", err)
		}
	}
	if err := f.AddTrait(ctx, "other", tr); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("a failure for n1 hit another node: %v", err)
	}
	f.ClearFailures()
	if err := f.AddTrait(ctx, "n1", tr); err != nil {
		t.Errorf("after ClearFailures: %v", err)
	}
}
