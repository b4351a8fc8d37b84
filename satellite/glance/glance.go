// Package glance resolves image names for the operations credential's
// NOVA_CREATE (Image service API reference "List Images": GET
// /v2/images?name=…). It only reads.
package glance

import (
	"context"
	"log/slog"
	"net/url"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Client reads Glance. Safe for concurrent use.
type Client struct {
	sc    *gophercloud.ServiceClient
	retry openstack.RetryPolicy
	log   *slog.Logger
}

// New returns a Client for sc (gophercloud openstack.NewImageV2) retrying
// transient failures per retry. log may be nil.
func New(sc *gophercloud.ServiceClient, retry openstack.RetryPolicy, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{sc: sc, retry: retry, log: log}
}

// ImageIDs returns the ids of the images named name (none, one, or several
// when the name is ambiguous). Read-only.
func (c *Client) ImageIDs(ctx context.Context, name string) ([]string, error) {
	ids, _, err := openstack.Retry(ctx, c.retry, c.log, "glance: find image", nil, func(ctx context.Context) ([]string, error) {
		var out struct {
			Images []struct {
				ID string `json:"id"`
			} `json:"images"`
		}
		_, err := c.sc.Get(ctx, c.sc.ServiceURL("images")+"?name="+url.QueryEscape(name), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		var ids []string
		for _, i := range out.Images {
			ids = append(ids, i.ID)
		}
		return ids, err
	})
	return ids, err
}

// APICalls lists every request of this package, as access rules.
func APICalls() []openstack.APICall {
	return openstack.Calls("image", "GET /v2/images")
}
