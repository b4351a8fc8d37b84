package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Placement resource providers: list (with the required= trait filter),
// get, create, update, delete and the read-only sub-resources.

// renderProvider is a resource provider document at the request's
// microversion.
func (p *placementCtx) renderProvider(pr *provider) map[string]any {
	url := placementPrefix + "/resource_providers/" + pr.uuid
	links := []any{map[string]any{"rel": "self", "href": url}}
	rels := []string{"inventories", "usages"}
	if p.ver.minor >= 1 {
		rels = append(rels, "aggregates")
	}
	if p.ver.minor >= 6 {
		rels = append(rels, "traits")
	}
	if p.ver.minor >= 11 {
		rels = append(rels, "allocations")
	}
	for _, rel := range rels {
		links = append(links, map[string]any{"rel": rel, "href": url + "/" + rel})
	}
	out := map[string]any{"uuid": pr.uuid, "name": pr.name, "generation": pr.generation, "links": links}
	if p.ver.minor >= 14 {
		out["parent_provider_uuid"] = nil
		out["root_provider_uuid"] = pr.uuid
	}
	return out
}

// lockProvider locks the Cloud and returns the provider, or unlocks,
// answers with notFound and returns nil.
func (p *placementCtx) lockProvider(uuid string, notFound func(uuid string)) *provider {
	p.c.mu.Lock()
	pr, ok := p.c.providers[uuid]
	if !ok {
		p.c.mu.Unlock()
		notFound(uuid)
		return nil
	}
	return pr
}

// notFoundProvider is the NotFound of ResourceProvider.get_by_uuid, turned
// into a 404 by PlacementHandler (outside the handler).
func (p *placementCtx) notFoundProvider(uuid string) {
	p.failOuter(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found", uuid), "")
}

var uuidFormatRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// providerQueryParams are the query parameters of GET /resource_providers
// with the microversion that added each.
var providerQueryParams = []struct {
	name  string
	minor int
}{{"name", 0}, {"uuid", 0}, {"member_of", 3}, {"resources", 4}, {"in_tree", 14}, {"required", 18}}

// providerTraitFilter is the required= filter: any-of sets that must all
// match, and forbidden traits.
type providerTraitFilter struct {
	required  [][]string
	forbidden map[string]bool
}

// listProviders is GET /resource_providers.
func (p *placementCtx) listProviders() {
	q := p.r.URL.Query()
	if !p.checkProviderQuery(q) {
		return
	}
	tf, msg := parseRequiredTraits(q["required"], p.ver.minor)
	if msg != "" {
		p.fail(http.StatusBadRequest, msg, "")
		return
	}
	c := p.c
	c.mu.Lock()
	if t := tf.unknownTraitLocked(c); t != "" {
		c.mu.Unlock()
		p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid trait(s) in \"required\" parameter: No such trait(s): %s.", t), "")
		return
	}
	name, hasName := lastValue(q, "name")
	uuid, hasUUID := lastValue(q, "uuid")
	inTree, hasTree := lastValue(q, "in_tree")
	_, hasMember := q["member_of"]
	out := []any{}
	var lm time.Time
	for _, pr := range c.providerListLocked() {
		if hasName && pr.name != name || hasUUID && pr.uuid != uuid || hasTree && pr.uuid != inTree || hasMember || !tf.matches(pr.traits) {
			continue
		}
		if pr.updated.After(lm) {
			lm = pr.updated
		}
		out = append(out, p.renderProvider(pr))
	}
	c.mu.Unlock()
	if lm.IsZero() {
		lm = c.now()
	}
	p.ok(http.StatusOK, map[string]any{"resource_providers": out}, lm)
}

// lastValue returns the last value of a query parameter and whether it was
// given (WebOb's GET[key]).
func lastValue(q url.Values, k string) (string, bool) {
	v, ok := q[k]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// checkProviderQuery answers 400 for a parameter the microversion does not
// know or a malformed uuid/in_tree, and reports whether the query is fine.
func (p *placementCtx) checkProviderQuery(q url.Values) bool {
	var allowed []string
	for _, a := range providerQueryParams {
		if p.ver.minor >= a.minor {
			allowed = append(allowed, a.name)
		}
	}
	var extra []string
	for k := range q {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		p.fail(http.StatusBadRequest, "Invalid query string parameters: "+additionalProperties(extra), "")
		return false
	}
	for _, k := range []string{"uuid", "in_tree"} {
		if v, ok := lastValue(q, k); ok && !uuidFormatRe.MatchString(v) {
			p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid query string parameters: '%s' is not a 'uuid'", v), "")
			return false
		}
	}
	return true
}

// parseRequiredTraits parses the required= values (only the last before
// 1.39): "A,!B" (forbidden from 1.22) and "in:A,B" (1.39). It returns the
// 400 message for a malformed value.
func parseRequiredTraits(vals []string, minor int) (providerTraitFilter, string) {
	tf := providerTraitFilter{forbidden: map[string]bool{}}
	if vals == nil {
		return tf, ""
	}
	if minor < 39 {
		vals = vals[len(vals)-1:]
	}
	for _, val := range vals {
		var msg string
		if strings.HasPrefix(val, "in:") {
			msg = tf.addAnyOf(val, minor)
		} else {
			msg = tf.addAllOf(val, minor)
		}
		if msg != "" {
			return tf, msg
		}
	}
	return tf, ""
}

// addAnyOf adds one "in:A,B" value.
func (tf *providerTraitFilter) addAnyOf(val string, minor int) string {
	if minor < 39 {
		return "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: " + val
	}
	var any []string
	for _, t := range strings.Split(val[3:], ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			return "Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: " + val
		}
		if strings.HasPrefix(t, "!") {
			return "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: " + val
		}
		any = append(any, t)
	}
	tf.required = append(tf.required, any)
	return ""
}

// addAllOf adds one "A,!B" value: each trait required, or forbidden.
func (tf *providerTraitFilter) addAllOf(val string, minor int) string {
	form := "HW_CPU_X86_VMX,CUSTOM_MAGIC"
	if minor >= 22 {
		form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
	}
	for _, t := range strings.Split(val, ",") {
		t = strings.TrimSpace(t)
		name := strings.TrimLeft(t, "!")
		if name == "" {
			return fmt.Sprintf("Invalid query string parameters: Expected 'required' parameter value of the form: %s. Got an empty trait in: %s", form, val)
		}
		if strings.HasPrefix(t, "!") {
			if minor < 22 {
				return "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: " + val
			}
			tf.forbidden[name] = true
		} else {
			tf.required = append(tf.required, []string{t})
		}
	}
	return ""
}

// unknownTraitLocked returns a trait of the filter that is not defined, or
// "".
func (tf providerTraitFilter) unknownTraitLocked(c *Cloud) string {
	for _, set := range tf.required {
		for _, t := range set {
			if _, ok := c.traits[t]; !ok {
				return t
			}
		}
	}
	for t := range tf.forbidden {
		if _, ok := c.traits[t]; !ok {
			return t
		}
	}
	return ""
}

// matches reports whether a provider with traits passes the filter.
func (tf providerTraitFilter) matches(traits []string) bool {
	for _, set := range tf.required {
		if !slices.ContainsFunc(set, func(t string) bool { return slices.Contains(traits, t) }) {
			return false
		}
	}
	for t := range tf.forbidden {
		if slices.Contains(traits, t) {
			return false
		}
	}
	return true
}

// providerListLocked returns the providers in creation order.
func (c *Cloud) providerListLocked() []*provider {
	list := make([]*provider, 0, len(c.providers))
	for _, pr := range c.providers {
		list = append(list, pr)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].created.Equal(list[j].created) {
			return list[i].created.Before(list[j].created)
		}
		return list[i].seq < list[j].seq
	})
	return list
}

// getProvider is GET /resource_providers/{uuid}.
func (p *placementCtx) getProvider(uuid string) {
	c := p.c
	pr := p.lockProvider(uuid, p.notFoundProvider)
	if pr == nil {
		return
	}
	body, lm := p.renderProvider(pr), pr.updated
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

// createProvider is POST /resource_providers.
func (p *placementCtx) createProvider() {
	var body map[string]any
	if !p.readJSON(&body) {
		return
	}
	name, _ := body["name"].(string)
	if name == "" {
		p.fail(http.StatusBadRequest, "JSON does not validate: 'name' is a required property", "")
		return
	}
	uuid, _ := body["uuid"].(string)
	if uuid == "" {
		uuid = newUUID()
	}
	c := p.c
	c.mu.Lock()
	for _, pr := range c.providers {
		if pr.uuid == uuid || pr.name == name {
			c.mu.Unlock()
			dup := "name: " + name
			if pr.uuid == uuid {
				dup = "uuid: " + uuid
			}
			p.fail(http.StatusConflict, fmt.Sprintf("Conflicting resource provider %s already exists.", dup), "placement.duplicate_name")
			return
		}
	}
	now := c.now()
	pr := c.newProviderLocked(uuid, name, now, now)
	out := p.renderProvider(pr)
	c.mu.Unlock()
	p.w.Header().Set("Location", "http://"+p.r.Host+placementPrefix+"/resource_providers/"+uuid)
	if p.ver.minor >= 20 {
		p.ok(http.StatusOK, out, now)
		return
	}
	p.ok(http.StatusCreated, nil, time.Time{})
}

// updateProvider is PUT /resource_providers/{uuid} (rename).
func (p *placementCtx) updateProvider(uuid string) {
	var body map[string]any
	if !p.readJSON(&body) {
		return
	}
	name, _ := body["name"].(string)
	c := p.c
	pr := p.lockProvider(uuid, p.notFoundProvider)
	if pr == nil {
		return
	}
	if name != "" {
		pr.name = name
		pr.generation++
		pr.updated = c.now()
	}
	out := p.renderProvider(pr)
	c.mu.Unlock()
	p.ok(http.StatusOK, out, pr.updated)
}

// deleteProvider is DELETE /resource_providers/{uuid}.
func (p *placementCtx) deleteProvider(uuid string) {
	c := p.c
	c.mu.Lock()
	if _, ok := c.providers[uuid]; !ok {
		c.mu.Unlock()
		p.fail(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found for delete", uuid), "")
		return
	}
	delete(c.providers, uuid)
	c.mu.Unlock()
	p.ok(http.StatusNoContent, nil, time.Time{})
}

// providerSubresource is GET of a provider's inventories, usages,
// aggregates or allocations.
func (p *placementCtx) providerSubresource(route int, uuid string) {
	c := p.c
	pr := p.lockProvider(uuid, func(uuid string) {
		p.fail(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found", uuid), "")
	})
	if pr == nil {
		return
	}
	var body map[string]any
	switch route {
	case routeInventories:
		inv := map[string]any{}
		for rc, i := range pr.inventory {
			inv[rc] = map[string]any{"allocation_ratio": json.Number("1.0"), "max_unit": 1, "min_unit": 1, "reserved": i.Reserved, "step_size": 1, "total": i.Total}
		}
		body = map[string]any{"inventories": inv, "resource_provider_generation": pr.generation}
	case routeUsages:
		usages := map[string]any{}
		used := 0
		if rec, ok := c.nodes[pr.uuid]; ok && rec.n.InstanceUUID != "" {
			used = 1
		}
		for rc := range pr.inventory {
			usages[rc] = used
		}
		body = map[string]any{"usages": usages, "resource_provider_generation": pr.generation}
	case routeAggregates:
		body = map[string]any{"aggregates": []any{}}
		if p.ver.minor >= 19 {
			body["resource_provider_generation"] = pr.generation
		}
	case routeAllocations:
		body = map[string]any{"allocations": map[string]any{}, "resource_provider_generation": pr.generation}
	}
	lm := pr.updated
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}
