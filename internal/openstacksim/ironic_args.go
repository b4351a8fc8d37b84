package openstacksim

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Ironic request arguments (ironic/common/args.py), node lookup and the
// conductor lock.

type ironicArgs struct {
	q   url.Values
	err string // first validation error (400)
}

func (a *ironicArgs) raw(name string) (string, bool) {
	v, ok := a.q[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func (a *ironicArgs) fail(format string, args ...any) {
	if a.err == "" {
		a.err = fmt.Sprintf(format, args...)
	}
}

func (a *ironicArgs) str(name string) *string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	return &v
}

func (a *ironicArgs) uuid(name string) *string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	if !isUUIDLike(v) {
		a.fail("Expected UUID for %s: %s", name, v)
	}
	return &v
}

func (a *ironicArgs) boolean(name string) *bool {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "t", "true", "on", "y", "yes":
		b := true
		return &b
	case "0", "f", "false", "off", "n", "no":
		b := false
		return &b
	}
	a.fail("Invalid %s: Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", name, v)
	return nil
}

func (a *ironicArgs) integer(name string) *int {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		a.fail("Expected an integer for %s: %s", name, v)
		return nil
	}
	return &n
}

// stringList is args.string_list: comma separated, trimmed, lower-cased,
// de-duplicated; an empty value gives an empty (non-nil) list.
func (a *ironicArgs) stringList(name string) []string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	items := []string{}
	for _, s := range strings.Split(v, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != "" && !slices.Contains(items, s) {
			items = append(items, s)
		}
	}
	return items
}

// unexpected returns Ironic's "Unexpected arguments" message for query
// parameters the method does not take, or "".
func unexpected(q url.Values, allowed ...string) string {
	var extra []string
	for k := range q {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return ""
	}
	sort.Strings(extra)
	return "Unexpected arguments: " + strings.Join(extra, ", ")
}

var hexRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// isUUIDLike is oslo_utils.uuidutils.is_uuid_like.
func isUUIDLike(s string) bool {
	t := strings.ToLower(s)
	t = strings.TrimPrefix(t, "urn:")
	t = strings.TrimPrefix(t, "uuid:")
	t = strings.TrimPrefix(t, "{")
	t = strings.TrimSuffix(t, "}")
	t = strings.ReplaceAll(t, "-", "")
	return hexRe.MatchString(t)
}

var logicalNameRe = regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`)

func validLogicalName(s string) bool { return len(s) <= 255 && logicalNameRe.MatchString(s) }

func minimalVersionMsg(minor int) string {
	return fmt.Sprintf("Request not acceptable. The minimal required API version should be 1.%d", minor)
}

// lookupNodeLocked is api_utils.get_rpc_node: by UUID, else by name (1.5+).
// It returns the record or writes the error.
func (c *Cloud) lookupNodeLocked(w http.ResponseWriter, ver int, ident string) *nodeRec {
	if isUUIDLike(ident) {
		if rec, ok := c.nodes[ident]; ok {
			return rec
		}
	} else if ver >= 5 {
		if !validLogicalName(ident) {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Expected a logical name or UUID but received %s.", ident))
			return nil
		}
		if rec := c.nodeNamedLocked(ident, nil); rec != nil {
			return rec
		}
	}
	ironicError(w, http.StatusNotFound, fmt.Sprintf("Node %s could not be found.", ident))
	return nil
}

// withNode runs f with the Cloud locked on the node ident names (by UUID,
// or by name from 1.5); an unknown node is answered 404 instead.
func (c *Cloud) withNode(w http.ResponseWriter, ver int, ident string, f func(rec *nodeRec)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec := c.lookupNodeLocked(w, ver, ident); rec != nil {
		f(rec)
	}
}

// withReservedNode is withNode for a write that takes the conductor's
// lock: a node with a reservation is answered 409 NodeLocked instead.
func (c *Cloud) withReservedNode(w http.ResponseWriter, ver int, ident string, f func(rec *nodeRec)) {
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		if c.lockLocked(w, rec) {
			f(rec)
		}
	})
}

// lockLocked is task_manager.acquire: 409 NodeLocked while a reservation is
// held (the real conductor retries for a few seconds first). On success the
// reservation round trip bumps updated_at.
func (c *Cloud) lockLocked(w http.ResponseWriter, rec *nodeRec) bool {
	if rec.n.Reservation != "" {
		ironicError(w, http.StatusConflict, fmt.Sprintf("Node %s is locked by host %s, please retry after the current operation is completed.", rec.n.UUID, rec.n.Reservation))
		return false
	}
	rec.n.UpdatedAt = c.now()
	return true
}

// notAcceptable is the 406 of a microversion too old for a parameter.
func notAcceptable(msg string) *apiErr {
	return &apiErr{status: http.StatusNotAcceptable, msg: msg}
}
