package site

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/placement"
)

// Method names recorded in Call.Method and matched by Fixture.Fail.
const (
	MethodListNodes          = "ListNodes"
	MethodGetNode            = "GetNode"
	MethodNodeTraits         = "NodeTraits"
	MethodAddTrait           = "AddTrait"
	MethodRemoveTrait        = "RemoveTrait"
	MethodProviders          = "Providers"
	MethodProvidersWithTrait = "ProvidersWithTrait"
	MethodEnsureTrait        = "EnsureTrait"
	MethodProviderTraits     = "ProviderTraits"
	MethodSetProviderTrait   = "SetProviderTrait"
	MethodListServers        = "ListServers"
	MethodGetServer          = "GetServer"
)

// Call is one call made to a Fixture.
type Call struct {
	// Method is one of the Method* names.
	Method string
	// ID is the node, provider or server the call was about ("" for
	// listings).
	ID string
	// Trait is the trait of a trait call ("" otherwise).
	Trait string
	// Present is the wanted presence of SetProviderTrait.
	Present bool
	// Err is what the call returned.
	Err error
	// Changed: the call changed the site (a write that found it already
	// as wanted did not).
	Changed bool
	// Extra is SetProvisionState's body beyond the target (clean_steps,
	// configdrive); nil otherwise.
	Extra map[string]any
}

// String renders the call for test failures, e.g. "AddTrait n1 CUSTOM_X".
func (c Call) String() string {
	s := c.Method
	if c.ID != "" {
		s += " " + c.ID
	}
	if c.Trait != "" {
		s += " " + c.Trait
	}
	if c.Err != nil {
		s += ": " + c.Err.Error()
	}
	return s
}

// Fixture is an in-memory site implementing Ironic, Placement, Nova and
// Images with the documented semantics (idempotent writes, never-partial
// listings, the not-found errors), for agent, gate and operations tests
// without HTTP: Ironic's provision state machine with holds, locks and
// failed actions (fixture_provision.go), power and maintenance
// (SetPower, SetMaintenance), Nova servers booted and deleted on a node
// (fixture_nova.go). It records every call (Calls) and fails calls on
// command (Fail). The zero value is not usable; use NewFixture. Safe for
// concurrent use.
type Fixture struct {
	mu        sync.Mutex
	nodes     map[string]ironic.Node
	order     []string // node UUIDs in listing order
	providers map[string]*fixtureProvider
	defined   map[string]bool // Placement traits
	servers   []nova.Server
	calls     []Call
	fails     []*failRule
	changed   map[string]int // node/provider id → writes that changed it

	// provisioning (fixture_provision.go, fixture_nova.go)
	prov    map[string]*provisioning
	drivers []string
	flavors []nova.Flavor
	images  map[string][]string
	created int // sequence of created nodes and servers
}

type fixtureProvider struct {
	traits     []string
	generation int64
}

type failRule struct {
	method, id string
	err        error
	times      int // < 0: for ever
}

// NewFixture returns an empty site: no nodes, no providers, no servers,
// no Placement traits defined.
func NewFixture() *Fixture {
	return &Fixture{nodes: map[string]ironic.Node{}, providers: map[string]*fixtureProvider{},
		defined: map[string]bool{}, changed: map[string]int{}}
}

// PutNode adds n, or replaces the node with the same UUID (keeping its
// place in the listing).
func (f *Fixture) PutNode(n ironic.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.nodes[n.UUID]; !ok {
		f.order = append(f.order, n.UUID)
	}
	n.Traits = slices.Clone(n.Traits)
	f.nodes[n.UUID] = n
}

// UpdateNode changes node id through fn; false when there is no such node.
func (f *Fixture) UpdateNode(id string, fn func(*ironic.Node)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	if !ok {
		return false
	}
	fn(&n)
	f.nodes[id] = n
	return true
}

// RemoveNode removes node id behind the runner's back, as someone else
// deleting it would (its provider stays, as in Placement).
func (f *Fixture) RemoveNode(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, id)
	f.order = slices.DeleteFunc(f.order, func(s string) bool { return s == id })
}

// Node returns a copy of node id.
func (f *Fixture) Node(id string) (ironic.Node, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	n.Traits = slices.Clone(n.Traits)
	return n, ok
}

// PutProvider adds or replaces resource provider id with traits (its
// generation bumps, as any change in Placement does).
func (f *Fixture) PutProvider(id string, traits ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.providers[id]
	if p == nil {
		p = &fixtureProvider{}
		f.providers[id] = p
	}
	p.traits = slices.Clone(traits)
	p.generation++
}

// Provider returns provider id's traits and whether it exists.
func (f *Fixture) Provider(id string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.providers[id]
	if p == nil {
		return nil, false
	}
	return slices.Clone(p.traits), true
}

// DefineTrait makes Placement know trait.
func (f *Fixture) DefineTrait(trait string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.defined[trait] = true
}

// SetServers replaces Nova's servers: ListServers shows the live ones,
// GetServer any of them (a DELETED record included).
func (f *Fixture) SetServers(servers ...nova.Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.servers = slices.Clone(servers)
}

// PutServer adds server s to Nova, or replaces the server with the same
// id (ids compare case-insensitively, as Nova's UUIDs do).
func (f *Fixture) PutServer(s nova.Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, o := range f.servers {
		if strings.EqualFold(o.ID, s.ID) {
			f.servers[i] = s
			return
		}
	}
	f.servers = append(f.servers, s)
}

// Fail makes the next times calls of method (a Method* name) about id
// ("" = any) return err instead of doing anything; times < 0 fails them
// for ever (until ClearFailures). Rules are matched in the order given.
func (f *Fixture) Fail(method, id string, err error, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails = append(f.fails, &failRule{method: method, id: id, err: err, times: times})
}

// ClearFailures drops every Fail rule.
func (f *Fixture) ClearFailures() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails = nil
}

// Calls returns the calls made so far, in order.
func (f *Fixture) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Writes returns the calls made so far that changed the site
// (Call.Changed), in order.
func (f *Fixture) Writes() []Call {
	var out []Call
	for _, c := range f.Calls() {
		if c.Changed {
			out = append(out, c)
		}
	}
	return out
}

// Changes returns how many writes changed node or provider id (or, for
// EnsureTrait, defined trait id).
func (f *Fixture) Changes(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed[id]
}

// ResetCalls forgets the recorded calls.
func (f *Fixture) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// beginLocked records a call and returns the injected failure, if any.
// f.mu is held.
func (f *Fixture) beginLocked(c Call) error {
	for i, r := range f.fails {
		if r.method != c.Method || (r.id != "" && r.id != c.ID) {
			continue
		}
		if r.times > 0 {
			r.times--
			if r.times == 0 {
				f.fails = append(f.fails[:i:i], f.fails[i+1:]...)
			}
		}
		c.Err = r.err
		f.calls = append(f.calls, c)
		return r.err
	}
	f.calls = append(f.calls, c)
	return nil
}

// endLocked sets the result of the last recorded call. f.mu is held.
func (f *Fixture) endLocked(err error) error {
	f.calls[len(f.calls)-1].Err = err
	return err
}

// changedLocked marks the last recorded call as having changed id. f.mu
// is held.
func (f *Fixture) changedLocked(id string) {
	f.calls[len(f.calls)-1].Changed = true
	f.changed[id]++
}

// ListNodes implements Ironic.
func (f *Fixture) ListNodes(ctx context.Context) ([]ironic.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodListNodes}); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, f.endLocked(fmt.Errorf("%w: %w", ironic.ErrListingIncomplete, err))
	}
	out := make([]ironic.Node, 0, len(f.order))
	for _, id := range f.order {
		n := f.nodes[id]
		n.Traits = slices.Clone(n.Traits)
		out = append(out, n)
	}
	return out, nil
}

// GetNode implements Ironic.
func (f *Fixture) GetNode(_ context.Context, id string) (ironic.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodGetNode, ID: id}); err != nil {
		return ironic.Node{}, err
	}
	n, ok := f.nodes[id]
	if !ok {
		return ironic.Node{}, f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	n.Traits = slices.Clone(n.Traits)
	return n, nil
}

// NodeTraits implements Ironic.
func (f *Fixture) NodeTraits(_ context.Context, id string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodNodeTraits, ID: id}); err != nil {
		return nil, err
	}
	n, ok := f.nodes[id]
	if !ok {
		return nil, f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	return append([]string{}, n.Traits...), nil
}

// AddTrait implements Ironic.
func (f *Fixture) AddTrait(_ context.Context, id, trait string) error {
	return f.setNodeTrait(Call{Method: MethodAddTrait, ID: id, Trait: trait}, true)
}

// RemoveTrait implements Ironic.
func (f *Fixture) RemoveTrait(_ context.Context, id, trait string) error {
	return f.setNodeTrait(Call{Method: MethodRemoveTrait, ID: id, Trait: trait}, false)
}

func (f *Fixture) setNodeTrait(c Call, present bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(c); err != nil {
		return err
	}
	n, ok := f.nodes[c.ID]
	if !ok {
		return f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, c.ID))
	}
	if slices.Contains(n.Traits, c.Trait) == present {
		return nil
	}
	if present {
		n.Traits = append(slices.Clone(n.Traits), c.Trait)
	} else {
		n.Traits = slices.DeleteFunc(slices.Clone(n.Traits), func(s string) bool { return s == c.Trait })
	}
	f.nodes[c.ID] = n
	f.changedLocked(c.ID)
	return nil
}

// Providers implements Placement.
func (f *Fixture) Providers(context.Context) (map[string]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodProviders}); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(f.providers))
	for id := range f.providers {
		out[id] = true
	}
	return out, nil
}

// ProvidersWithTrait implements Placement.
func (f *Fixture) ProvidersWithTrait(_ context.Context, trait string) (map[string]bool, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodProvidersWithTrait, Trait: trait}); err != nil {
		return nil, false, err
	}
	out := map[string]bool{}
	if !f.defined[trait] {
		return out, false, nil
	}
	for id, p := range f.providers {
		if slices.Contains(p.traits, trait) {
			out[id] = true
		}
	}
	return out, true, nil
}

// EnsureTrait implements Placement.
func (f *Fixture) EnsureTrait(_ context.Context, trait string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodEnsureTrait, Trait: trait}); err != nil {
		return err
	}
	if !strings.HasPrefix(trait, "CUSTOM_") {
		return f.endLocked(fmt.Errorf("fixture: %s is not a custom trait", trait))
	}
	if !f.defined[trait] {
		f.defined[trait] = true
		f.changedLocked(trait)
	}
	return nil
}

// ProviderTraits implements Placement.
func (f *Fixture) ProviderTraits(_ context.Context, id string) ([]string, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodProviderTraits, ID: id}); err != nil {
		return nil, 0, err
	}
	p := f.providers[id]
	if p == nil {
		return nil, 0, f.endLocked(fmt.Errorf("%w: %s", placement.ErrProviderNotFound, id))
	}
	return append([]string{}, p.traits...), p.generation, nil
}

// SetProviderTrait implements Placement. Adding a trait Placement does not
// know defines it first, as the real client does.
func (f *Fixture) SetProviderTrait(_ context.Context, id, trait string, present bool) (placement.SetResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodSetProviderTrait, ID: id, Trait: trait, Present: present}); err != nil {
		return placement.SetResult{}, err
	}
	p := f.providers[id]
	if p == nil {
		return placement.SetResult{}, f.endLocked(fmt.Errorf("%w: %s", placement.ErrProviderNotFound, id))
	}
	res := placement.SetResult{Attempts: 1}
	if slices.Contains(p.traits, trait) != present {
		if present {
			f.defined[trait] = true
			p.traits = append(p.traits, trait)
		} else {
			p.traits = slices.DeleteFunc(p.traits, func(s string) bool { return s == trait })
		}
		sort.Strings(p.traits)
		p.generation++
		f.changedLocked(id)
		res.Changed = true
	}
	res.Generation, res.Traits = p.generation, slices.Clone(p.traits)
	return res, nil
}

// ListServers implements Nova.
func (f *Fixture) ListServers(context.Context) ([]nova.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodListServers}); err != nil {
		return nil, err
	}
	out := []nova.Server{}
	for _, s := range f.servers {
		if !s.Deleted() { // Nova lists live servers only
			out = append(out, s)
		}
	}
	return out, nil
}

// GetServer implements Nova.
func (f *Fixture) GetServer(_ context.Context, id string) (nova.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodGetServer, ID: id}); err != nil {
		return nova.Server{}, err
	}
	for _, s := range f.servers {
		if strings.EqualFold(s.ID, id) {
			return s, nil
		}
	}
	return nova.Server{}, f.endLocked(fmt.Errorf("%w: %s", nova.ErrServerNotFound, id))
}

var (
	_ Ironic    = (*Fixture)(nil)
	_ Placement = (*Fixture)(nil)
	_ Nova      = (*Fixture)(nil)
)
