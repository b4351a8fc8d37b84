package nova

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// OperationsMicroversion is the compute microversion of the operations
// credential's client (NewForOperations): 2.74 lets a server create name
// its destination with host/hypervisor_hostname (docs/design/openstack.md §9 "Nova
// create on a chosen node"), and 2.61 and later list flavor extra_specs in
// /flavors/detail.
const OperationsMicroversion = "2.74"

// ErrFlavorNotFound: Nova answered 404 for the flavor asked for.
var ErrFlavorNotFound = errors.New("nova: flavor not found")

// NewForOperations returns a Client for the operations credential (NOVA_*
// operations of satellite/operations): its requests carry
// OperationsMicroversion (sc itself is not changed), and every call —
// GetServer included — is retried per retry.
func NewForOperations(sc *gophercloud.ServiceClient, retry openstack.RetryPolicy, log *slog.Logger) *Client {
	cp := *sc
	cp.Microversion = OperationsMicroversion
	c := New(&cp, log)
	c.ReadRetry = retry
	return c
}

// Flavor is what NOVA_CREATE reads of a Nova flavor (compute API reference
// "Flavors").
type Flavor struct {
	// ID and Name identify the flavor.
	ID   string `json:"id"`
	Name string `json:"name"`
	// ExtraSpecs are its extra_specs, e.g. "resources:CUSTOM_GPU": "1"
	// for a flavor of one Ironic node of resource class gpu (2.61+).
	ExtraSpecs map[string]string `json:"extra_specs"`
}

// CreateServerOpts is a server create targeted at one Ironic node (compute
// API reference "Create Server").
type CreateServerOpts struct {
	// Name is the server's name; FlavorID and ImageID are ids (resolved
	// before, not names).
	Name, FlavorID, ImageID string
	// KeyName and UserData (plain text; base64-encoded here) are optional.
	KeyName, UserData string
	// Networks are network UUIDs; none gives "networks": "none".
	Networks []string
	// NodeUUID is the Ironic node, sent as hypervisor_hostname.
	NodeUUID string
	// Metadata is the server's metadata; empty sends none.
	Metadata map[string]string
}

// ServersNamed lists the credential's servers whose name is exactly name
// (GET /servers/detail?name=^…$: Nova's name filter is a regular
// expression), deleted ones left out.
func (c *Client) ServersNamed(ctx context.Context, name string) ([]Server, error) {
	return opCall(ctx, c, "nova: find server by name", func(ctx context.Context) ([]Server, error) {
		var out struct {
			Servers []wireServer `json:"servers"`
		}
		u := c.sc.ServiceURL("servers", "detail") + "?name=" + url.QueryEscape("^"+regexp.QuoteMeta(name)+"$")
		_, err := c.sc.Get(ctx, u, &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		var exact []Server
		for _, w := range out.Servers {
			if s := w.toServer(); s.Name == name && !s.Deleted() {
				exact = append(exact, s)
			}
		}
		return exact, err
	})
}

// Flavor reads a flavor by id (GET /flavors/{id}); a 404 wraps
// ErrFlavorNotFound.
func (c *Client) Flavor(ctx context.Context, id string) (Flavor, error) {
	return opCall(ctx, c, "nova: get flavor", func(ctx context.Context) (Flavor, error) {
		var out struct {
			Flavor Flavor `json:"flavor"`
		}
		_, err := c.sc.Get(ctx, c.sc.ServiceURL("flavors", url.PathEscape(id)), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return Flavor{}, fmt.Errorf("%w: %s", ErrFlavorNotFound, id)
		}
		return out.Flavor, err
	})
}

// Flavors lists every flavor, public or not, with its extra_specs (GET
// /flavors/detail?is_public=None).
func (c *Client) Flavors(ctx context.Context) ([]Flavor, error) {
	return opCall(ctx, c, "nova: list flavors", func(ctx context.Context) ([]Flavor, error) {
		var out struct {
			Flavors []Flavor `json:"flavors"`
		}
		_, err := c.sc.Get(ctx, c.sc.ServiceURL("flavors", "detail")+"?is_public=None", &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return out.Flavors, err
	})
}

// CreateServer boots a server on o.NodeUUID (POST /servers, 202) and
// returns its id. Not idempotent and not retried: a lost answer would boot
// a second server, so callers look the server up by name before calling
// again.
func (c *Client) CreateServer(ctx context.Context, o CreateServerOpts) (string, error) {
	s := map[string]any{
		"name": o.Name, "flavorRef": o.FlavorID, "imageRef": o.ImageID,
		"hypervisor_hostname": o.NodeUUID,
		"networks":            "none",
	}
	if len(o.Networks) > 0 {
		var nets []map[string]string
		for _, n := range o.Networks {
			nets = append(nets, map[string]string{"uuid": n})
		}
		s["networks"] = nets
	}
	if o.KeyName != "" {
		s["key_name"] = o.KeyName
	}
	if len(o.Metadata) > 0 {
		s["metadata"] = o.Metadata
	}
	if o.UserData != "" {
		s["user_data"] = base64.StdEncoding.EncodeToString([]byte(o.UserData))
	}
	var out struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	_, err := c.sc.Post(ctx, c.sc.ServiceURL("servers"), map[string]any{"server": s}, &out, &gophercloud.RequestOpts{OkCodes: []int{202}})
	return out.Server.ID, err
}

// DeleteServer deletes a server (DELETE /servers/{id}, 204). Idempotent: a
// 404 counts as done.
func (c *Client) DeleteServer(ctx context.Context, id string) error {
	_, err := opCall(ctx, c, "nova: delete server", func(ctx context.Context) (struct{}, error) {
		_, err := c.sc.Delete(ctx, c.sc.ServiceURL("servers", url.PathEscape(id)), &gophercloud.RequestOpts{OkCodes: []int{204}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	return err
}

// opCall runs fn under ReadRetry, retrying what is transient.
func opCall[T any](ctx context.Context, c *Client, op string, fn func(ctx context.Context) (T, error)) (T, error) {
	v, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, op, nil, fn)
	return v, err
}

// OperationsAPICalls lists every Nova request of the operations credential
// (deploy/openstack/operations-access-rules.yaml).
func OperationsAPICalls() []openstack.APICall {
	return openstack.Calls("compute", `
		GET /v2.1/flavors/*
		GET /v2.1/flavors/detail
		GET /v2.1/servers/detail
		POST /v2.1/servers
		GET /v2.1/servers/*
		DELETE /v2.1/servers/*
`)
}
