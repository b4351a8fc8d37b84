package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ironlink/ironlink/satellite/placement"
	"github.com/ironlink/ironlink/satellite/site"
)

// DefaultTrait is the gate trait used when Applier.Trait is "".
const DefaultTrait = "CUSTOM_CUSTOMER_READY"

// Applier writes the gate trait for one device at a time. Its methods are
// safe for concurrent use on different nodes.
type Applier struct {
	// Ironic writes the node trait (required): a *ironic.Client, or a
	// site.Fixture in tests.
	Ironic site.Ironic
	// Placement writes the resource-provider trait; nil on a standalone
	// site (a nil interface, not a nil *placement.Client).
	Placement site.Placement
	// Trait is the gate trait; "" means DefaultTrait.
	Trait string
}

// Applied says what Apply did (how it went is told by the error, which
// Classify turns into a site.Result).
type Applied struct {
	// Detail is a one-line human summary, e.g. "quarantine: node trait
	// removed; provider trait removed (generation 12)".
	Detail string
	// NodeChanged is true when the Ironic node's traits were written.
	NodeChanged bool
	// ProviderChanged is true when the resource provider's traits were
	// written.
	ProviderChanged bool
	// ProviderGeneration is the provider generation after the call; 0 on a
	// standalone site or when the provider does not exist.
	ProviderGeneration int64
}

// State is the gate as observed on both sides.
type State struct {
	// NodeHasTrait: the Ironic node carries the trait.
	NodeHasTrait bool
	// ProviderExists: Placement has the node's resource provider (false on
	// a standalone site).
	ProviderExists bool
	// ProviderHasTrait: the resource provider carries the trait.
	ProviderHasTrait bool
	// ProviderGeneration is the provider generation read.
	ProviderGeneration int64
	// Drift: Placement exists, the provider exists, and the two sides
	// disagree (SPEC: "a difference between the two is reported as drift").
	Drift bool
}

func (a *Applier) trait() string {
	if a.Trait == "" {
		return DefaultTrait
	}
	return a.Trait
}

// Apply makes the gate of nodeID match the desired state: quarantined →
// trait absent on the node and (where Placement exists) on its resource
// provider; released (!quarantined) → trait present on both, the custom
// trait created in Placement first. It is idempotent: a repeated call
// writes nothing and reports NodeChanged/ProviderChanged false.
//
// A quarantine attempts both writes even if the first fails; a release
// writes the provider only after the node write succeeded (see the package
// doc). A missing resource provider (Nova has not registered the node) is
// not an error: it is noted in Detail; Nova copies the node trait when it
// registers the node. Errors wrap the ironic/placement errors
// (ironic.ErrNodeNotFound, ironic.ErrNodeLocked,
// placement.ErrGenerationConflict, ...); on error the Applied still
// describes what was done.
func (a *Applier) Apply(ctx context.Context, nodeID string, quarantined bool) (Applied, error) {
	if a.Ironic == nil {
		return Applied{}, errors.New("gate: Applier.Ironic is nil")
	}
	if nodeID == "" {
		return Applied{}, errors.New("gate: empty node id")
	}
	trait := a.trait()
	want := !quarantined
	verb := "release"
	if quarantined {
		verb = "quarantine"
	}
	var (
		res   Applied
		notes []string
		errs  []error
	)

	if want && a.Placement != nil {
		if err := a.Placement.EnsureTrait(ctx, trait); err != nil {
			res.Detail = verb + ": not applied: " + err.Error()
			return res, fmt.Errorf("gate: %s node %s: %w", verb, nodeID, err)
		}
	}

	changed, err := a.setNode(ctx, nodeID, trait, want)
	res.NodeChanged = changed
	switch {
	case err != nil:
		notes = append(notes, "node trait NOT "+pastTense(want)+": "+err.Error())
		errs = append(errs, err)
	case changed:
		notes = append(notes, "node trait "+pastTense(want))
	default:
		notes = append(notes, "node trait already "+presence(want))
	}

	// A release must not open Placement when the node write failed.
	if a.Placement != nil && (err == nil || quarantined) {
		pr, perr := a.Placement.SetProviderTrait(ctx, nodeID, trait, want)
		res.ProviderChanged = pr.Changed
		res.ProviderGeneration = pr.Generation
		switch {
		case errors.Is(perr, placement.ErrProviderNotFound):
			notes = append(notes, "no resource provider in Placement yet (Nova copies the node trait when it registers the node)")
		case perr != nil:
			notes = append(notes, "provider trait NOT "+pastTense(want)+": "+perr.Error())
			errs = append(errs, perr)
		case pr.Changed:
			n := fmt.Sprintf("provider trait %s (provider generation %d", pastTense(want), pr.Generation)
			if pr.Attempts > 1 {
				n += fmt.Sprintf(", after %d rounds", pr.Attempts)
			}
			notes = append(notes, n+")")
		default:
			notes = append(notes, fmt.Sprintf("provider trait already %s (provider generation %d)", presence(want), pr.Generation))
		}
	} else if a.Placement != nil {
		notes = append(notes, "provider trait left alone until the node trait is set")
	}

	res.Detail = verb + ": " + strings.Join(notes, "; ")
	if len(errs) > 0 {
		return res, fmt.Errorf("gate: %s node %s: %w", verb, nodeID, errors.Join(errs...))
	}
	return res, nil
}

// setNode reads the node's traits and writes only when they differ from
// want; it reports whether it wrote.
func (a *Applier) setNode(ctx context.Context, nodeID, trait string, want bool) (bool, error) {
	cur, err := a.Ironic.NodeTraits(ctx, nodeID)
	if err != nil {
		return false, err
	}
	if slices.Contains(cur, trait) == want {
		return false, nil
	}
	if want {
		err = a.Ironic.AddTrait(ctx, nodeID, trait)
	} else {
		err = a.Ironic.RemoveTrait(ctx, nodeID, trait)
	}
	return err == nil, err
}

// State reads the gate on the node and (where Placement exists) on its
// resource provider, for the periodic resync and drift reports.
func (a *Applier) State(ctx context.Context, nodeID string) (State, error) {
	if a.Ironic == nil {
		return State{}, errors.New("gate: Applier.Ironic is nil")
	}
	trait := a.trait()
	cur, err := a.Ironic.NodeTraits(ctx, nodeID)
	if err != nil {
		return State{}, fmt.Errorf("gate: state of node %s: %w", nodeID, err)
	}
	s := State{NodeHasTrait: slices.Contains(cur, trait)}
	if a.Placement == nil {
		return s, nil
	}
	ts, gen, err := a.Placement.ProviderTraits(ctx, nodeID)
	switch {
	case errors.Is(err, placement.ErrProviderNotFound):
		return s, nil
	case err != nil:
		return s, fmt.Errorf("gate: state of node %s: %w", nodeID, err)
	}
	s.ProviderExists = true
	s.ProviderHasTrait = slices.Contains(ts, trait)
	s.ProviderGeneration = gen
	s.Drift = s.ProviderHasTrait != s.NodeHasTrait
	return s, nil
}

func pastTense(present bool) string {
	if present {
		return "added"
	}
	return "removed"
}

func presence(present bool) string {
	if present {
		return "present"
	}
	return "absent"
}
