package ironic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// Errors callers can test with errors.Is.
var (
	// ErrNodeNotFound: Ironic answered 404 for the node itself.
	ErrNodeNotFound = errors.New("ironic: node not found")
	// ErrNodeLocked: a trait write kept getting 409 (NodeLocked) until the
	// retry budget ran out.
	ErrNodeLocked = errors.New("ironic: node locked")
	// ErrListingIncomplete: a node listing could not be completed; no nodes
	// are returned with it.
	ErrListingIncomplete = errors.New("ironic: node listing incomplete")
)

// Defaults for a new Client.
const (
	// DefaultPageLimit is the page size requested (Ironic's default
	// [api]max_limit; the server may cap it lower).
	DefaultPageLimit = 1000
	// DefaultMaxRestarts is how often a listing restarts after its marker
	// node vanished (404) before giving up.
	DefaultMaxRestarts = 3
	// maxPages guards against a server that never ends a listing.
	maxPages = 100000
)

// Client talks to Ironic. It is safe for concurrent use once configured;
// change the exported tuning fields only before first use.
type Client struct {
	// ReadRetry bounds the retries of each read (one listing page, one
	// node, one trait list) on 502/503/504 and timeouts.
	ReadRetry openstack.RetryPolicy
	// WriteRetry bounds the retries of one trait write on 409 NodeLocked,
	// 502/503/504 and timeouts.
	WriteRetry openstack.RetryPolicy
	// PageLimit is the "limit" sent with each listing page (default 1000).
	PageLimit int
	// MaxRestarts is how often a listing restarts when its marker vanished.
	MaxRestarts int

	sc  *gophercloud.ServiceClient
	log *slog.Logger

	mu sync.Mutex
	// dropped are optional fields a server rejected, per request kind
	// ("list", "get"); they are not asked for again and are reported in
	// Node.Missing. Ironic 21.4 answers 500 for allocation_uuid (and
	// conductor) in a list's fields but serves them on a single node.
	dropped map[string]map[string]bool
	// lastCount is the node count of the last complete listing (a size
	// hint for the next one).
	lastCount atomic.Int64
}

// New returns a Client for sc, whose Microversion must have been negotiated
// (satellite/openstack.Connect; at least 1.37). log may be nil.
func New(sc *gophercloud.ServiceClient, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := openstack.DefaultRetryPolicy()
	w.InitialInterval = time.Second
	w.MaxInterval = 10 * time.Second
	w.MaxAttempts = 8
	w.Budget = 60 * time.Second
	return &Client{
		ReadRetry:   openstack.DefaultRetryPolicy(),
		WriteRetry:  w,
		PageLimit:   DefaultPageLimit,
		MaxRestarts: DefaultMaxRestarts,
		sc:          sc,
		log:         log.With("service", "ironic"),
		dropped:     map[string]map[string]bool{},
	}
}

// fields returns the fields to request for kind ("list" or "get") at v.
func (c *Client) fields(kind string, v openstack.Microversion) ([]string, map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fieldsWithout(v, c.dropped[kind])
}

// dropField stops asking for f in requests of kind.
func (c *Client) dropField(kind, f string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped[kind] == nil {
		c.dropped[kind] = map[string]bool{}
	}
	c.dropped[kind][f] = true
	c.log.Warn("ironic rejected an optional node field; no longer requesting it", "field", f, "request", kind, "err", err)
}

// rejectedField returns the optional field among asked that a 400, 406 or
// 500 answer names, or "".
func rejectedField(err error, asked []string) string {
	switch openstack.StatusCode(err) {
	case http.StatusBadRequest, http.StatusNotAcceptable, http.StatusInternalServerError:
	default:
		return ""
	}
	body := string(openstack.ResponseBody(err))
	for _, f := range nodeFields {
		if !f.optional || !slices.Contains(asked, f.name) {
			continue
		}
		for _, form := range []string{"'" + f.name + "'", `"` + f.name + `"`, `\"` + f.name + `\"`, "Field " + f.name + " ", "field " + f.name + " "} {
			if strings.Contains(body, form) {
				return f.name
			}
		}
	}
	return ""
}

// errFieldRejected: the server refused an optional field; retry without it.
type errFieldRejected struct {
	field string
	err   error
}

func (e *errFieldRejected) Error() string {
	return fmt.Sprintf("field %s rejected: %v", e.field, e.err)
}
func (e *errFieldRejected) Unwrap() error { return e.err }

// APICalls lists every Ironic request this package makes, as access rules
// (docs/design/openstack.md §5.2).
func APICalls() []openstack.APICall {
	return openstack.Calls("baremetal", `
		GET /v1/nodes
		GET /v1/nodes/*
		GET /v1/nodes/*/traits
		GET /v1/nodes/*/inventory
		GET /v1/nodes/*/bios
		PUT /v1/nodes/*/traits/*
		DELETE /v1/nodes/*/traits/*
`)
}

// version returns the negotiated microversion, or an error below 1.37.
func (c *Client) version() (openstack.Microversion, error) {
	v, err := openstack.ParseMicroversion(c.sc.Microversion)
	if err != nil {
		return v, fmt.Errorf("ironic: client microversion %q not negotiated (use satellite/openstack.Connect): %w", c.sc.Microversion, err)
	}
	if v.Less(openstack.IronicRequired) {
		return v, fmt.Errorf("ironic: client microversion %s is below the required %s", v, openstack.IronicRequired)
	}
	return v, nil
}

type listPage struct {
	Nodes []wireNode `json:"nodes"`
	Next  string     `json:"next"`
}

// errMarkerGone marks a 404 on a page requested with a marker.
type errMarkerGone struct {
	marker string
	err    error
}

func (e *errMarkerGone) Error() string {
	return fmt.Sprintf("marker node %s vanished: %v", e.marker, e.err)
}
func (e *errMarkerGone) Unwrap() error { return e.err }

// ListNodes returns every node Ironic shows this credential (Ironic
// api-ref "List Nodes": GET /v1/nodes?fields=…&limit=…&marker=…), in
// Ironic's order (by database id).
//
// Each page URL is built here with the full query and the marker (the
// UUID of the previous page's last node); Ironic's "next" link is only a
// hint that more pages exist. A page that fails with 502/503/504 or a
// timeout is retried per ReadRetry; a 404 for the marker restarts the whole
// listing up to MaxRestarts times. Any failure returns an error wrapping
// ErrListingIncomplete (and the cause) and a nil slice — never a partial
// list.
func (c *Client) ListNodes(ctx context.Context) ([]Node, error) {
	v, err := c.version()
	if err != nil {
		return nil, err
	}
	limit := c.PageLimit
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	start := time.Now()
	restart := 0
	for {
		fields, missing := c.fields("list", v)
		nodes, pages, err := c.listOnce(ctx, fields, missing, limit)
		if err == nil {
			c.log.Debug("listed nodes", "nodes", len(nodes), "pages", pages, "restarts", restart,
				"microversion", v.String(), "elapsed", time.Since(start).Round(time.Millisecond))
			return nodes, nil
		}
		var rej *errFieldRejected
		if errors.As(err, &rej) && ctx.Err() == nil {
			c.dropField("list", rej.field, rej.err)
			continue // bounded: each optional field is dropped at most once
		}
		var gone *errMarkerGone
		if errors.As(err, &gone) && restart < c.MaxRestarts && ctx.Err() == nil {
			restart++
			c.log.Warn("marker node vanished during listing, restarting", "marker", gone.marker, "restart", restart, "max", c.MaxRestarts)
			continue
		}
		return nil, fmt.Errorf("%w after %d restarts (%s): %w", ErrListingIncomplete, restart, time.Since(start).Round(time.Millisecond), err)
	}
}

func (c *Client) listOnce(ctx context.Context, fields []string, missing map[string]bool, limit int) ([]Node, int, error) {
	hint := int(c.lastCount.Load()) // the last listing's size: one allocation for a site that did not grow
	nodes := make([]Node, 0, hint)
	seen := make(map[string]int, hint) // uuid → index in nodes
	marker := ""
	badTimes := 0
	unsent := map[string]int{} // field → nodes whose answer lacked it
	firstUnsentPage := 0
	for page := 1; ; page++ {
		if page > maxPages {
			return nil, page, fmt.Errorf("more than %d pages: giving up", maxPages)
		}
		q := url.Values{}
		q.Set("fields", strings.Join(fields, ","))
		q.Set("limit", strconv.Itoa(limit))
		if marker != "" {
			q.Set("marker", marker)
		}
		u := c.sc.ServiceURL("nodes") + "?" + q.Encode()
		op := "ironic: list nodes page " + strconv.Itoa(page)
		p, _, err := openstack.Retry(ctx, c.ReadRetry, c.log, op, nil, func(ctx context.Context) (listPage, error) {
			// A fresh, zeroed page sized for a full answer: no growing while
			// decoding (never a reused one: json keeps a reused element's
			// fields the answer lacks, which would hide an unsent field).
			p := listPage{Nodes: make([]wireNode, 0, limit)}
			_, err := c.sc.Get(ctx, u, &p, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
			return p, err
		})
		if err != nil {
			if f := rejectedField(err, fields); f != "" {
				return nil, page, &errFieldRejected{field: f, err: err}
			}
			if marker != "" && openstack.StatusCode(err) == http.StatusNotFound {
				return nil, page, &errMarkerGone{marker: marker, err: err}
			}
			return nil, page, fmt.Errorf("%s: %w", op, err)
		}
		for i := range p.Nodes {
			w := &p.Nodes[i]
			if w.UUID == "" {
				return nil, page, fmt.Errorf("%s: node #%d has no uuid", op, i)
			}
			if w.ProvisionUpdatedAt.Bad != "" {
				badTimes++
				if badTimes <= 3 {
					c.log.Warn("unparsable provision_updated_at, using zero time", logkey.DeviceID, w.UUID, "value", w.ProvisionUpdatedAt.Bad)
				}
			}
			if first, dup := seen[w.UUID]; dup {
				c.log.Warn("node listed twice, keeping the first", logkey.DeviceID, w.UUID, "page", page)
				nodes[first].ListedTwice = true
				continue
			}
			seen[w.UUID] = len(nodes)
			n := w.toNode(fields, missing)
			for f := range n.Unsent {
				if firstUnsentPage == 0 {
					firstUnsentPage = page
				}
				unsent[f]++
			}
			nodes = append(nodes, n)
		}
		if len(p.Nodes) == 0 || (p.Next == "" && len(p.Nodes) < limit) {
			c.lastCount.Store(int64(len(nodes)))
			if len(unsent) > 0 {
				c.log.Warn("Ironic's listing lacked fields that were asked for; conditions that need them keep their last known value",
					"nodes_lacking", unsentSummary(unsent), "first_page", firstUnsentPage, "pages", page)
			}
			return nodes, page, nil
		}
		last := p.Nodes[len(p.Nodes)-1].UUID
		if last == marker {
			return nil, page, fmt.Errorf("%s: marker %s did not advance", op, marker)
		}
		marker = last
	}
}

// unsentSummary renders field → node count as "fault=17,lessee=17" (sorted).
func unsentSummary(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(m[k])
	}
	return strings.Join(parts, ",")
}

// GetNode reads one node by UUID or name (Ironic api-ref "Show Node
// Details": GET /v1/nodes/{node_ident}?fields=…), with the same fields and
// Missing rules as ListNodes. A 404 wraps ErrNodeNotFound.
func (c *Client) GetNode(ctx context.Context, id string) (Node, error) {
	v, err := c.version()
	if err != nil {
		return Node{}, err
	}
	var (
		w       wireNode
		missing map[string]bool
		fields  []string
	)
	for {
		fields, missing = c.fields("get", v)
		q := url.Values{}
		q.Set("fields", strings.Join(fields, ","))
		u := c.sc.ServiceURL("nodes", url.PathEscape(id)) + "?" + q.Encode()
		w, _, err = openstack.Retry(ctx, c.ReadRetry, c.log, "ironic: get node "+id, nil, func(ctx context.Context) (wireNode, error) {
			var w wireNode
			_, err := c.sc.Get(ctx, u, &w, &gophercloud.RequestOpts{OkCodes: []int{http.StatusOK}})
			return w, err
		})
		if f := rejectedField(err, fields); f != "" && ctx.Err() == nil {
			c.dropField("get", f, err)
			continue
		}
		break
	}
	if err != nil {
		if openstack.StatusCode(err) == http.StatusNotFound {
			return Node{}, fmt.Errorf("%w: %s: %w", ErrNodeNotFound, id, err)
		}
		return Node{}, fmt.Errorf("ironic: get node %s: %w", id, err)
	}
	if w.ProvisionUpdatedAt.Bad != "" {
		c.log.Warn("unparsable provision_updated_at, using zero time", logkey.DeviceID, id, "value", w.ProvisionUpdatedAt.Bad)
	}
	n := w.toNode(fields, missing)
	if len(n.Unsent) > 0 {
		c.log.Warn("Ironic's answer for a node lacked fields that were asked for", logkey.DeviceID, id, "fields", strings.Join(slices.Sorted(maps.Keys(n.Unsent)), ","))
	}
	return n, nil
}
