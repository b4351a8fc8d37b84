package operations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Connect authenticates with the operations credential (cfg.Cloud, a cloud
// of its own in clouds.yaml: docs/design/operations.md) and returns Ironic, and
// Nova and Glance when the catalog lists them and cfg.Nova allows it.
// Placement is never used. Errors as [openstack.Connect]; a catalog without
// compute or image is not an error (NOVA_* operations then fail with
// NovaUnavailable).
func Connect(ctx context.Context, cfg openstack.Config, log *slog.Logger) (Clients, *openstack.Clients, error) {
	novaMode := cfg.Nova
	cfg.Placement = openstack.PlacementOff
	cfg.Nova = openstack.NovaOff
	oc, err := openstack.Connect(ctx, cfg, log)
	if err != nil {
		return Clients{}, nil, err
	}
	c := Clients{Baremetal: oc.Baremetal}
	if novaMode == openstack.NovaOff {
		return c, oc, nil
	}
	checked, err := openstack.Check(cfg)
	if err != nil {
		return Clients{}, nil, err
	}
	cp, err := gcopenstack.NewComputeV2(oc.Provider, checked.Endpoint)
	switch {
	case err == nil:
		c.Compute = cp
		oc.Compute = cp
	case isNoEndpoint(err) && novaMode != openstack.NovaOn:
	default:
		return Clients{}, nil, fmt.Errorf("operations: cloud %q: compute endpoint: %w", cfg.Cloud, err)
	}
	if c.Compute != nil {
		if im, err := gcopenstack.NewImageV2(oc.Provider, checked.Endpoint); err == nil {
			c.Image = im
		} else if !isNoEndpoint(err) {
			return Clients{}, nil, fmt.Errorf("operations: cloud %q: image endpoint: %w", cfg.Cloud, err)
		}
	}
	return c, oc, nil
}

func isNoEndpoint(err error) bool {
	var p *gophercloud.ErrEndpointNotFound
	var v gophercloud.ErrEndpointNotFound
	return errors.As(err, &p) || errors.As(err, &v)
}
