package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/store"
)

// The lists other than the device list (operations, commands, holds,
// events) share two things with it (docs/reference/web.md "Lists"): a
// ?selector= in the CLI's syntax, which selects devices (the list shows
// the rows of those devices), and, for the tables, sorting on the server
// by any column (?sort=[-]KEY, paged by ?offset=).

// listPageSize is the rows per page of the server-sorted lists.
const listPageSize = 100

// maxListOffset bounds ?offset= (a deeper page is narrowed by a filter).
const maxListOffset = 100000

// deviceSelection reads ?selector= of a list (the device list's parser,
// parseSelectorFilter, with its messages) for the caller id: the devices
// it selects, not removed, within the caller's sites. ok=false: the
// selector is empty. The error is the page's answer (400, or the scope's
// denial), already written to w when handled is true.
func (s *Server) deviceSelection(w http.ResponseWriter, r *http.Request, ctx context.Context, q url.Values, id Identity) (f listFilter, ok, handled bool) {
	if err := parseSelectorFilter(&f, q.Get("selector")); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return f, false, true
	}
	if f.SelText == "" {
		return f, false, false
	}
	if sc := authn.CallerScope(ctx); f.Sel.Site != "" && !sc.Allows(f.Sel.Site) {
		s.apiFail(w, r, sc.Deny(ctx, s.log, "site "+f.Sel.Site, f.Sel.Site))
		return f, false, true
	}
	f.Sites = id.Sites
	if len(f.Sel.Labels) > 0 {
		var err error
		if f.LabelsIndexed, err = store.FileLabelsEmpty(ctx, s.store.Pool()); err != nil {
			s.dbFail(w, r, err)
			return f, false, true
		}
	}
	return f, true, false
}

// sqlArgs numbers a query's arguments as they are added.
type sqlArgs []any

// add appends v and returns its placeholder ("$3").
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// selectionCond is the condition "col is one of the devices f selects"
// and the arguments it starts with: when a query uses it, these must be
// its first arguments ($1-$15, listFilter.args), the others added after.
func selectionCond(f listFilter, col string) (string, sqlArgs) {
	return col + ` IN (SELECT d.id FROM devices d` + f.where() + `)`, sqlArgs(f.args())
}

// listCol is one sortable column of a server-sorted list: the ?sort= key,
// the head's label and its SQL.
type listCol struct{ Key, Label, SQL string }

// listOrder is a server-sorted list's order: a column key, descending or
// not.
type listOrder struct {
	Key  string
	Desc bool
}

// parseListOrder reads ?sort=[-]KEY against cols (def without one). The
// error names the keys, as the device list's does.
func parseListOrder(v string, cols []listCol, def string) (listOrder, error) {
	if v == "" {
		return listOrder{Key: def}, nil
	}
	key, desc := strings.CutPrefix(v, "-")
	var keys []string
	for _, c := range cols {
		if c.Key == key {
			return listOrder{Key: key, Desc: desc}, nil
		}
		keys = append(keys, c.Key)
	}
	return listOrder{}, badInput("sort", fmt.Errorf("sort %q is not a column: %s (prefix - for descending)", v, strings.Join(keys, ", ")))
}

// orderBy is the ORDER BY expression of o over cols (then tie, which
// orders rows equal in the column).
func (o listOrder) orderBy(cols []listCol, tie string) string {
	for _, c := range cols {
		if c.Key == o.Key {
			dir := ""
			if o.Desc {
				dir = " DESC"
			}
			return c.SQL + dir + ", " + tie
		}
	}
	return tie
}

// heads are the column heads of a server-sorted list at path: each links
// to the list sorted by it (ascending, or descending when it is sorted by
// it ascending already), the filters kept, the offset dropped.
func (o listOrder) heads(path string, q url.Values, cols []listCol, def string) []sortHead {
	out := make([]sortHead, 0, len(cols))
	for _, c := range cols {
		v := url.Values{}
		for k, vs := range q {
			if k != "offset" && k != "sort" {
				v[k] = vs
			}
		}
		if o.Key == c.Key && !o.Desc {
			v.Set("sort", "-"+c.Key)
		} else if c.Key != def {
			v.Set("sort", c.Key)
		}
		href := path
		if len(v) > 0 {
			href += "?" + v.Encode()
		}
		mark := ""
		if o.Key == c.Key {
			mark = " ▲"
			if o.Desc {
				mark = " ▼"
			}
		}
		out = append(out, sortHead{Key: c.Key, Label: c.Label, Href: href, Mark: mark})
	}
	return out
}

// parseOffset reads ?offset= (0 without one).
func parseOffset(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxListOffset || strings.Trim(v, "0123456789") != "" { // digits only, no sign
		return 0, badInput("offset", fmt.Errorf("offset %q is outside 0-%d", v, maxListOffset))
	}
	return n, nil
}

// nextHref is the list's next page at path: q with offset moved on by
// listPageSize.
func nextHref(path string, q url.Values, offset int) string {
	next := url.Values{}
	for k, vs := range q {
		next[k] = vs
	}
	next.Set("offset", strconv.Itoa(offset+listPageSize))
	return path + "?" + next.Encode()
}

// deviceRowsCond is the WHERE condition of a list of per-device rows (the
// commands' or operations' table under alias, with device_id and site
// columns) and its arguments: the selector's devices (sel, nil: any),
// site ("": any), the caller's sites (nil: every site) and one device
// ("": any). Callers append their own terms with args.add.
func deviceRowsCond(alias string, sel *listFilter, site string, sites []string, deviceID string) (string, sqlArgs) {
	var args sqlArgs
	where := "TRUE"
	if sel != nil {
		where, args = selectionCond(*sel, alias+".device_id")
	}
	if site != "" {
		where += " AND " + alias + ".site = " + args.add(site)
	}
	if sites != nil {
		where += " AND " + alias + ".site = ANY(" + args.add(sites) + "::text[])"
	}
	if deviceID != "" {
		where += " AND " + alias + ".device_id = " + args.add(deviceID) + "::uuid"
	}
	return where, args
}
