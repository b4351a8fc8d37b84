package policyapi

import (
	"context"
	"time"

	"github.com/ironlink/ironlink/hub/store"
)

// Store is what the policy API reads and writes of the hub's database
// (*store.Store implements it): the policy administration role, a
// device's site, and whether a site exists.
type Store interface {
	store.PolicyAdmin
	// DeviceSite: see store.Store.DeviceSite.
	DeviceSite(ctx context.Context, id string) (string, error)
	// GuardFaultLabels: see store.Store.GuardFaultLabels.
	GuardFaultLabels(ctx context.Context, site string, since time.Time) ([]map[string]string, error)
	// DomainTrips: see store.Store.DomainTrips.
	DomainTrips(ctx context.Context, site string) ([]store.DomainTrip, error)
	// SiteExists: see store.Store.SiteExists.
	SiteExists(ctx context.Context, name string) (bool, error)
}
