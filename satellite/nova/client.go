// Package nova reads the Nova servers the satellite's orphan sweep compares
// with Ironic (docs/design/openstack.md §4): every server of every project with the
// hypervisor it runs on, and single servers by id. The sweep's client never
// writes to Nova; the operations credential's client (NewForOperations,
// operations.go) also finds flavors and servers by name, and creates and
// deletes servers for NOVA_CREATE and NOVA_DELETE. It is the production
// implementation of site.Nova.
//
// The sweep's requests use the base compute API (microversion 2.1): every
// field the sweep needs (tenant_id, status, OS-EXT-STS:task_state and the
// admin-only OS-EXT-SRV-ATTR:hypervisor_hostname) exists there, so nothing
// is negotiated. The operations' requests carry OperationsMicroversion
// (2.74).
package nova

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Errors callers can test with errors.Is.
var (
	// ErrServerNotFound: Nova answered 404 for the server (unknown, or
	// deleted and no longer shown).
	ErrServerNotFound = errors.New("nova: server not found")
	// ErrListingIncomplete: the server listing could not be completed; no
	// servers are returned with it.
	ErrListingIncomplete = errors.New("nova: server listing incomplete")
)

// DefaultPageLimit is the "limit" sent with each listing page (Nova's
// default [api]max_limit is 1000; the server may cap it lower).
const DefaultPageLimit = 1000

// maxPages guards against a server that never ends a listing.
const maxPages = 100000

// Server is what the sweep needs of one Nova server (compute api-ref "List
// Servers Detailed").
type Server struct {
	// ID is the server's UUID (Ironic's instance_uuid when it runs on a node).
	ID string
	// Name is the server's name.
	Name string
	// TenantID is the server's project.
	TenantID string
	// Status is Nova's status, for example "ACTIVE", "BUILD", "DELETED",
	// "SOFT_DELETED", "ERROR".
	Status string
	// TaskState is OS-EXT-STS:task_state ("spawning", "deleting", ...); ""
	// when null, i.e. no operation is in progress.
	TaskState string
	// HypervisorHostname is OS-EXT-SRV-ATTR:hypervisor_hostname: for Nova's
	// Ironic driver, the UUID of the node the server runs on; "" when null
	// or hidden.
	HypervisorHostname string
	// HypervisorVisible is true when the response carried the
	// OS-EXT-SRV-ATTR:hypervisor_hostname key at all (null included). Nova
	// renders it only for callers passing the extended-attributes policy
	// (admin by default); without it every node would look orphaned.
	HypervisorVisible bool
	// FaultMessage is fault.message of a server in ERROR ("" when Nova sent
	// no fault).
	FaultMessage string
}

// Deleted reports whether Nova keeps the server only as a deleted record.
func (s Server) Deleted() bool { return s.Status == "DELETED" || s.Status == "SOFT_DELETED" }

// wireServer decodes the keys the sweep reads; Hypervisor stays nil when
// the key is absent.
type wireServer struct {
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	TenantID   string           `json:"tenant_id"`
	Status     string           `json:"status"`
	TaskState  *string          `json:"OS-EXT-STS:task_state"`
	Hypervisor *json.RawMessage `json:"OS-EXT-SRV-ATTR:hypervisor_hostname"`
	Fault      *struct {
		Message string `json:"message"`
	} `json:"fault"`
}

func (w wireServer) toServer() Server {
	s := Server{ID: strings.ToLower(w.ID), Name: w.Name, TenantID: w.TenantID, Status: strings.ToUpper(w.Status)}
	if w.Fault != nil {
		s.FaultMessage = w.Fault.Message
	}
	if w.TaskState != nil {
		s.TaskState = *w.TaskState
	}
	if w.Hypervisor != nil {
		s.HypervisorVisible = true
		var h *string
		if err := json.Unmarshal(*w.Hypervisor, &h); err == nil && h != nil {
			s.HypervisorHostname = strings.ToLower(*h)
		}
	}
	return s
}

// Client reads Nova. Safe for concurrent use; change the exported tuning
// fields only before first use.
type Client struct {
	// ReadRetry bounds the retries of each read (one page, one server) on
	// 502/503/504 and timeouts.
	ReadRetry openstack.RetryPolicy
	// PageLimit is the "limit" sent with each listing page (default 1000).
	PageLimit int

	sc  *gophercloud.ServiceClient
	log *slog.Logger
}

// New returns a Client for sc (gophercloud openstack.NewComputeV2). log may
// be nil.
func New(sc *gophercloud.ServiceClient, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{ReadRetry: openstack.DefaultRetryPolicy(), PageLimit: DefaultPageLimit, sc: sc, log: log.With("service", "nova")}
}

// APICalls lists every Nova request this package makes, as access rules
// (docs/design/openstack.md §5.2). Paths are as Nova sees them with a catalog endpoint
// ending in /v2.1; a catalog that puts the project id in the URL needs
// "/v2.1/*/servers/detail" and "/v2.1/*/servers/*" instead.
func APICalls() []openstack.APICall {
	return openstack.Calls("compute", `
		GET /v2.1/servers/detail
		GET /v2.1/servers/*
`)
}

type listPage struct {
	Servers []wireServer `json:"servers"`
	Links   []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
	} `json:"servers_links"`
}

// ListServers returns every server of every project that Nova shows
// (compute api-ref "List Servers Detailed": GET
// /servers/detail?all_tenants=1&limit=…&marker=…; deleted servers are not
// listed). Pages follow the marker of the previous page's last server while
// Nova sends a "next" link or a full page. A page failing with 502/503/504
// or a timeout is retried per ReadRetry; any failure returns an error
// wrapping ErrListingIncomplete and nil — never a partial list. A
// credential without the all-tenants policy gets 403 here.
func (c *Client) ListServers(ctx context.Context) ([]Server, error) {
	limit := c.PageLimit
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	start := time.Now()
	var out []Server
	seen := map[string]bool{}
	marker := ""
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, fmt.Errorf("%w: more than %d pages", ErrListingIncomplete, maxPages)
		}
		q := url.Values{}
		q.Set("all_tenants", "1")
		q.Set("limit", strconv.Itoa(limit))
		if marker != "" {
			q.Set("marker", marker)
		}
		u := c.sc.ServiceURL("servers", "detail") + "?" + q.Encode()
		op := "nova: list servers page " + strconv.Itoa(page)
		p, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, op, nil, func(ctx context.Context) (listPage, error) {
			var p listPage
			_, err := c.sc.Get(ctx, u, &p, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
			return p, err
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrListingIncomplete, op, err)
		}
		for _, w := range p.Servers {
			if w.ID == "" {
				return nil, fmt.Errorf("%w: %s: a server has no id", ErrListingIncomplete, op)
			}
			s := w.toServer()
			if seen[s.ID] {
				continue
			}
			seen[s.ID] = true
			out = append(out, s)
		}
		next := false
		for _, l := range p.Links {
			next = next || l.Rel == "next"
		}
		if len(p.Servers) == 0 || (!next && len(p.Servers) < limit) {
			break
		}
		last := strings.ToLower(p.Servers[len(p.Servers)-1].ID)
		if last == marker {
			return nil, fmt.Errorf("%w: %s: marker %s did not advance", ErrListingIncomplete, op, marker)
		}
		marker = last
	}
	if out == nil {
		out = []Server{}
	}
	c.log.Debug("listed servers", "servers", len(out), "elapsed", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// GetServer reads one server (compute api-ref "Show Server Details": GET
// /servers/{server_id}); an admin may read any project's server. A 404
// wraps ErrServerNotFound.
func (c *Client) GetServer(ctx context.Context, id string) (Server, error) {
	u := c.sc.ServiceURL("servers", url.PathEscape(id))
	w, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, "nova: get server "+id, nil, func(ctx context.Context) (wireServer, error) {
		var body struct {
			Server wireServer `json:"server"`
		}
		_, err := c.sc.Get(ctx, u, &body, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
		return body.Server, err
	})
	if err != nil {
		if openstack.StatusCode(err) == http.StatusNotFound {
			return Server{}, fmt.Errorf("%w: %s: %w", ErrServerNotFound, id, err)
		}
		return Server{}, fmt.Errorf("nova: get server %s: %w", id, err)
	}
	return w.toServer(), nil
}
