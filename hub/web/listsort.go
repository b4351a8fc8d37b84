package web

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/reflect/protoreflect"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/devsel"
	"github.com/ironlink/ironlink/internal/sitename"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/wire"
)

// sortColumns are the device list's sort keys (?sort=KEY, ?sort=-KEY for
// descending) and their SQL, %s standing for the table alias. Every
// column is NOT NULL, so the keyset comparison never meets a NULL.
var sortColumns = map[string]string{
	"name":       "%s.name",
	"site":       "%s.site",
	"status":     "%s.status",
	"why":        "%s.status_reason",
	"since":      "%s.status_changed_at",
	"quarantine": "%s.desired_impairment",
	"id":         "%s.id",
}

// defaultSort is the list's order without ?sort: by name (the id breaks
// ties, and orders the unnamed).
const defaultSort = "name"

// maxSelectorBytes bounds the selector filter's text.
const maxSelectorBytes = 1024

// parseSort reads ?sort=[-]KEY into f. Errors name the keys.
func parseSort(f *listFilter, v string) error {
	f.Sort = defaultSort
	if v == "" {
		return nil
	}
	key, desc := strings.CutPrefix(v, "-")
	if _, ok := sortColumns[key]; !ok {
		return fmt.Errorf("sort %q is not a column: name, site, status, why, since, quarantine or id (prefix - for descending)", v)
	}
	f.Sort, f.Desc = key, desc
	return nil
}

// parseSelectorFilter reads ?selector= (the CLI's --selector syntax,
// internal/devsel) into f, in the store's terms.
func parseSelectorFilter(f *listFilter, v string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	if err := textcheck.Line("selector", v, maxSelectorBytes); err != nil {
		return err
	}
	sel, err := devsel.Parse(v, "selector")
	if err != nil {
		return err
	}
	ss, err := storeSelector(sel)
	if err != nil {
		return err
	}
	f.Sel, f.SelText = ss, v
	return nil
}

// storeSelector converts a parsed selector for the list's query, with
// BulkService's checks of the site and the name pattern.
func storeSelector(sel *ironlinkv1.DeviceSelector) (store.DeviceSelector, error) {
	// A selector field this list does not filter by (one added to the API
	// later) is refused rather than silently ignored.
	var unknown string
	sel.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !listSelectorFields[string(fd.Name())] {
			unknown = string(fd.Name())
			return false
		}
		return true
	})
	if unknown != "" {
		return store.DeviceSelector{}, fmt.Errorf("selector: the device list cannot filter by %s yet; the bulk actions' preview (BulkService) can", unknown)
	}
	out := store.DeviceSelector{Site: sel.GetSite(), Reasons: sel.GetConditionReasons(), ResourceClass: sel.GetResourceClass(),
		Labels: sel.GetLabels()}
	if out.Site != "" && !sitename.Valid(out.Site) {
		return out, fmt.Errorf("selector: site %q is not a valid site name", out.Site)
	}
	for _, st := range sel.GetStatuses() {
		out.Statuses = append(out.Statuses, hubstatus.Status(wire.EnumName(st, "OPERATIONAL_STATUS_")))
	}
	if p := sel.GetNamePattern(); p != "" {
		like, err := store.GlobToLike(p)
		if err != nil {
			return out, fmt.Errorf("selector: name %q: %w", p, err)
		}
		out.NameLike = like
	}
	return out, nil
}

// listSelectorFields are the DeviceSelector fields the list filters by.
var listSelectorFields = map[string]bool{"site": true, "statuses": true, "condition_reasons": true, "resource_class": true, "name_pattern": true,
	"labels": true}

// sortHref is the list's URL sorted by key: ascending, or descending when
// it is sorted by key ascending already; the cursor is dropped.
func sortHref(q url.Values, f listFilter, key string) string {
	v := url.Values{}
	for k, vs := range q {
		if k != "after" && k != "sort" {
			v[k] = vs
		}
	}
	if f.Sort == key && !f.Desc {
		v.Set("sort", "-"+key)
	} else if key != defaultSort {
		v.Set("sort", key)
	}
	if len(v) == 0 {
		return "/devices"
	}
	return "/devices?" + v.Encode()
}

// sortMark is the arrow a sorted column head shows.
func sortMark(f listFilter, key string) string {
	if f.Sort != key {
		return ""
	}
	if f.Desc {
		return " ▼"
	}
	return " ▲"
}

// devicesByIDPrefix returns the ids (at most 10) of the devices of sites
// (nil: every site) whose id starts with prefix.
func devicesByIDPrefix(ctx context.Context, pool *pgxpool.Pool, prefix string, sites []string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT id::text FROM devices WHERE id::text LIKE $1 AND (NOT $2 OR site = ANY($3::text[]))
		ORDER BY id LIMIT 10`, likeEscape(strings.ToLower(prefix))+"%", sites != nil, sites)
	if err != nil {
		return nil, fmt.Errorf("devices by id prefix: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("devices by id prefix: %w", err)
	}
	return ids, nil
}
