package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/traits"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Errors callers can test with errors.Is.
var (
	// ErrProviderNotFound: Placement answered 404 for the resource provider
	// (Nova has not registered the node yet, or it was deleted).
	ErrProviderNotFound = errors.New("placement: resource provider not found")
	// ErrGenerationConflict: SetProviderTrait kept losing the race for the
	// provider generation (409 placement.concurrent_update) until its
	// attempts ran out.
	ErrGenerationConflict = errors.New("placement: provider generation conflict")
)

// Defaults for a new Client.
const (
	// DefaultConflictAttempts bounds the read-modify-write rounds of
	// SetProviderTrait.
	DefaultConflictAttempts = 8
)

// SetResult reports what SetProviderTrait did.
type SetResult struct {
	// Changed is true when this call wrote the provider's traits.
	Changed bool
	// Generation is the provider generation after the call (the one read
	// when nothing had to change).
	Generation int64
	// Attempts is the number of read-modify-write rounds (1 without a
	// conflict).
	Attempts int
	// Traits is the provider's full trait list after the call.
	Traits []string
}

// Client talks to Placement. Safe for concurrent use; change the exported
// tuning fields only before first use.
type Client struct {
	// ReadRetry bounds retries of each read on 502/503/504 and timeouts.
	ReadRetry openstack.RetryPolicy
	// WriteRetry bounds retries of each single write on 502/503/504 and
	// timeouts (a generation conflict is not retried here, see
	// ConflictAttempts).
	WriteRetry openstack.RetryPolicy
	// ConflictAttempts bounds the read-modify-write rounds of
	// SetProviderTrait (default 8).
	ConflictAttempts int
	// ConflictBackoff sets the jittered waits between those rounds
	// (InitialInterval, MaxInterval; default 100 ms → 2 s).
	ConflictBackoff openstack.RetryPolicy

	sc  *gophercloud.ServiceClient
	log *slog.Logger
}

// New returns a Client for sc, whose Microversion must have been negotiated
// (satellite/openstack.Connect; at least 1.6). log may be nil.
func New(sc *gophercloud.ServiceClient, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		ReadRetry:        openstack.DefaultRetryPolicy(),
		WriteRetry:       openstack.DefaultRetryPolicy(),
		ConflictAttempts: DefaultConflictAttempts,
		ConflictBackoff:  openstack.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaxInterval: 2 * time.Second},
		sc:               sc,
		log:              log.With("service", "placement"),
	}
}

// APICalls lists every Placement request this package makes, as access
// rules (docs/design/openstack.md §5.2). DELETE /resource_providers/*/traits is
// deliberately absent.
func APICalls() []openstack.APICall {
	return openstack.Calls("placement", `
		GET /resource_providers
		GET /resource_providers/*/traits
		PUT /resource_providers/*/traits
		GET /traits/*
		PUT /traits/*
`)
}

func (c *Client) version() (openstack.Microversion, error) {
	v, err := openstack.ParseMicroversion(c.sc.Microversion)
	if err != nil {
		return v, fmt.Errorf("placement: client microversion %q not negotiated (use satellite/openstack.Connect): %w", c.sc.Microversion, err)
	}
	if v.Less(openstack.PlacementRequired) {
		return v, fmt.Errorf("placement: client microversion %s is below the required %s", v, openstack.PlacementRequired)
	}
	return v, nil
}

type rpList struct {
	ResourceProviders []struct {
		UUID string `json:"uuid"`
	} `json:"resource_providers"`
}

func (c *Client) listProviders(ctx context.Context, query url.Values, op string) (map[string]bool, error) {
	u := c.sc.ServiceURL("resource_providers")
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	l, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, op, nil, func(ctx context.Context) (rpList, error) {
		var l rpList
		_, err := c.sc.Get(ctx, u, &l, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
		return l, err
	})
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(l.ResourceProviders))
	for _, rp := range l.ResourceProviders {
		set[rp.UUID] = true
	}
	return set, nil
}

// Providers returns the UUIDs of all resource providers (Placement api-ref
// "List resource providers": GET /resource_providers; Placement does not
// page this list). For a Nova-managed Ironic node the provider UUID is the
// node UUID (docs/design/openstack.md §3.2).
func (c *Client) Providers(ctx context.Context) (map[string]bool, error) {
	if _, err := c.version(); err != nil {
		return nil, err
	}
	set, err := c.listProviders(ctx, nil, "placement: list resource providers")
	if err != nil {
		return nil, fmt.Errorf("placement: list resource providers: %w", err)
	}
	return set, nil
}

// ProvidersWithTrait returns the UUIDs of the providers that carry trait
// (GET /resource_providers?required=TRAIT, microversion 1.18+; below 1.18
// every provider's traits are read one by one). traitDefined is false,
// with an empty set and a nil error, when Placement does not know the
// trait (400 on the query, confirmed by GET /traits/{name} → 404).
func (c *Client) ProvidersWithTrait(ctx context.Context, trait string) (set map[string]bool, traitDefined bool, err error) {
	v, err := c.version()
	if err != nil {
		return nil, false, err
	}
	if err := openstack.ValidateTraitName(trait, false); err != nil {
		return nil, false, fmt.Errorf("placement: providers with trait: %w", err)
	}
	if v.Less(openstack.Microversion{Major: 1, Minor: 18}) {
		return c.providersWithTraitSlow(ctx, trait)
	}
	set, err = c.listProviders(ctx, url.Values{"required": {trait}}, "placement: list resource providers with "+trait)
	if err == nil {
		return set, true, nil
	}
	if openstack.StatusCode(err) == http.StatusBadRequest {
		defined, derr := c.TraitDefined(ctx, trait)
		if derr == nil && !defined {
			return map[string]bool{}, false, nil
		}
	}
	return nil, false, fmt.Errorf("placement: list resource providers with %s: %w", trait, err)
}

func (c *Client) providersWithTraitSlow(ctx context.Context, trait string) (map[string]bool, bool, error) {
	defined, err := c.TraitDefined(ctx, trait)
	if err != nil {
		return nil, false, err
	}
	if !defined {
		return map[string]bool{}, false, nil
	}
	all, err := c.Providers(ctx)
	if err != nil {
		return nil, false, err
	}
	set := map[string]bool{}
	for rp := range all {
		ts, _, err := c.ProviderTraits(ctx, rp)
		if errors.Is(err, ErrProviderNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, false, err
		}
		if slices.Contains(ts, trait) {
			set[rp] = true
		}
	}
	return set, true, nil
}

// TraitDefined reports whether Placement knows trait (Placement api-ref
// "Show traits": GET /traits/{name} → 204 yes, 404 no).
func (c *Client) TraitDefined(ctx context.Context, trait string) (bool, error) {
	if _, err := c.version(); err != nil {
		return false, err
	}
	_, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, "placement: show trait "+trait, nil, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, traits.Get(ctx, c.sc, trait).Err
	})
	switch {
	case err == nil:
		return true, nil
	case openstack.StatusCode(err) == http.StatusNotFound:
		return false, nil
	}
	return false, fmt.Errorf("placement: show trait %s: %w", trait, err)
}

// EnsureTrait makes sure the custom trait exists (Placement api-ref
// "Update traits": GET /traits/{name}, and when 404, PUT /traits/{name} →
// 201 created / 204 already there). The name must be CUSTOM_[A-Z0-9_]+.
func (c *Client) EnsureTrait(ctx context.Context, trait string) error {
	if err := openstack.ValidateTraitName(trait, true); err != nil {
		return fmt.Errorf("placement: ensure trait: %w", err)
	}
	defined, err := c.TraitDefined(ctx, trait)
	if err != nil {
		return err
	}
	if defined {
		return nil
	}
	_, _, err = openstack.Retry(ctx, c.WriteRetry, c.log, "placement: create trait "+trait, nil, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, traits.Create(ctx, c.sc, trait).Err
	})
	if err != nil {
		return fmt.Errorf("placement: create trait %s: %w", trait, err)
	}
	c.log.Info("custom trait created", "trait", trait)
	return nil
}

// ProviderTraits returns the provider's traits and generation (Placement
// api-ref "List resource provider traits": GET
// /resource_providers/{uuid}/traits). A 404 wraps ErrProviderNotFound.
func (c *Client) ProviderTraits(ctx context.Context, rpUUID string) ([]string, int64, error) {
	if _, err := c.version(); err != nil {
		return nil, 0, err
	}
	t, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, "placement: list traits of provider "+rpUUID, nil, func(ctx context.Context) (*resourceproviders.ResourceProviderTraits, error) {
		return resourceproviders.GetTraits(ctx, c.sc, rpUUID).Extract()
	})
	if err != nil {
		if openstack.StatusCode(err) == http.StatusNotFound {
			return nil, 0, fmt.Errorf("%w: %s: %w", ErrProviderNotFound, rpUUID, err)
		}
		return nil, 0, fmt.Errorf("placement: list traits of provider %s: %w", rpUUID, err)
	}
	ts := t.Traits
	if ts == nil {
		ts = []string{}
	}
	return ts, int64(t.ResourceProviderGeneration), nil
}

// placementErrors is Placement's error body: {"errors": [{"status", "title",
// "detail", "code" (1.23+), "request_id"}]}.
type placementErrors struct {
	Errors []struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"errors"`
}

// isGenerationConflict reports whether a 409 is a generation race: code
// placement.concurrent_update, or no code at all (before 1.23).
func isGenerationConflict(err error) bool {
	if openstack.StatusCode(err) != http.StatusConflict {
		return false
	}
	var pe placementErrors
	if json.Unmarshal(openstack.ResponseBody(err), &pe) != nil || len(pe.Errors) == 0 {
		return true
	}
	for _, e := range pe.Errors {
		if e.Code == "" || e.Code == "placement.concurrent_update" {
			return true
		}
	}
	return false
}

// SetProviderTrait adds (present) or removes (!present) one trait on a
// resource provider and leaves every other trait alone (Placement api-ref
// "Update resource provider traits": PUT /resource_providers/{uuid}/traits
// with {"traits", "resource_provider_generation"}).
//
// Each round reads the provider's traits and generation, returns at once
// when nothing has to change (Changed false), else PUTs the set with the
// one-trait delta applied. A 409 generation conflict starts a new round
// after a jittered wait (ConflictBackoff), up to ConflictAttempts rounds,
// then fails wrapping ErrGenerationConflict. When adding, a 400 because
// Placement does not know the trait creates it (EnsureTrait) and retries.
// A 404 wraps ErrProviderNotFound. 502/503/504 and timeouts are retried
// per request.
func (c *Client) SetProviderTrait(ctx context.Context, rpUUID, trait string, present bool) (SetResult, error) {
	if _, err := c.version(); err != nil {
		return SetResult{}, err
	}
	if err := openstack.ValidateTraitName(trait, false); err != nil {
		return SetResult{}, fmt.Errorf("placement: set provider trait: %w", err)
	}
	maxRounds := c.ConflictAttempts
	if maxRounds < 1 {
		maxRounds = DefaultConflictAttempts
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = max(c.ConflictBackoff.InitialInterval, time.Millisecond)
	bo.MaxInterval = max(c.ConflictBackoff.MaxInterval, bo.InitialInterval)
	bo.RandomizationFactor = 0.5
	ensured := false
	var lastErr error
	for round := 1; round <= maxRounds; round++ {
		cur, gen, err := c.ProviderTraits(ctx, rpUUID)
		if err != nil {
			return SetResult{Attempts: round}, err
		}
		if slices.Contains(cur, trait) == present {
			return SetResult{Changed: false, Generation: gen, Attempts: round, Traits: cur}, nil
		}
		want := applyDelta(cur, trait, present)
		res, _, err := openstack.Retry(ctx, c.WriteRetry, c.log, "placement: update traits of provider "+rpUUID, nil, func(ctx context.Context) (*resourceproviders.ResourceProviderTraits, error) {
			return resourceproviders.UpdateTraits(ctx, c.sc, rpUUID, resourceproviders.UpdateTraitsOpts{
				ResourceProviderGeneration: int(gen),
				Traits:                     want,
			}).Extract()
		})
		if err == nil {
			ts := res.Traits
			if ts == nil {
				ts = []string{}
			}
			c.log.Debug("provider trait set", "provider", rpUUID, "trait", trait, "present", present,
				"generation", res.ResourceProviderGeneration, "rounds", round)
			return SetResult{Changed: true, Generation: int64(res.ResourceProviderGeneration), Attempts: round, Traits: ts}, nil
		}
		lastErr = err
		switch {
		case openstack.StatusCode(err) == http.StatusNotFound:
			return SetResult{Attempts: round}, fmt.Errorf("%w: %s: %w", ErrProviderNotFound, rpUUID, err)
		case isGenerationConflict(err):
			c.log.Debug("provider generation conflict, re-reading", "provider", rpUUID, "generation", gen, "round", round)
			if round == maxRounds {
				break
			}
			t := time.NewTimer(bo.NextBackOff())
			select {
			case <-ctx.Done():
				t.Stop()
				return SetResult{Attempts: round}, fmt.Errorf("placement: set trait %s on provider %s: %w", trait, rpUUID, ctx.Err())
			case <-t.C:
			}
			continue
		case present && !ensured && openstack.StatusCode(err) == http.StatusBadRequest:
			defined, derr := c.TraitDefined(ctx, trait)
			if derr != nil || defined {
				return SetResult{Attempts: round}, fmt.Errorf("placement: update traits of provider %s: %w", rpUUID, err)
			}
			c.log.Info("trait unknown to placement, creating it", "trait", trait)
			if err := c.EnsureTrait(ctx, trait); err != nil {
				return SetResult{Attempts: round}, err
			}
			ensured = true
			continue
		default:
			return SetResult{Attempts: round}, fmt.Errorf("placement: update traits of provider %s: %w", rpUUID, err)
		}
	}
	return SetResult{Attempts: maxRounds}, fmt.Errorf("%w: trait %s on provider %s: still conflicting after %d rounds: %w",
		ErrGenerationConflict, trait, rpUUID, maxRounds, lastErr)
}

// applyDelta returns a new slice: cur with trait appended (present) or
// removed (!present); never nil.
func applyDelta(cur []string, trait string, present bool) []string {
	out := make([]string, 0, len(cur)+1)
	for _, t := range cur {
		if t != trait {
			out = append(out, t)
		}
	}
	if present {
		out = append(out, trait)
	}
	return out
}
