package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Placement traits: a provider's traits (generation-checked PUT) and the
// trait catalogue (list, get, create, delete).

// getProviderTraits is GET /resource_providers/{uuid}/traits.
func (p *placementCtx) getProviderTraits(uuid string) {
	c := p.c
	pr := p.lockProvider(uuid, func(uuid string) {
		p.fail(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found: No resource provider with uuid %s found", uuid, uuid), "")
	})
	if pr == nil {
		return
	}
	body, lm := c.providerTraitsLocked(pr)
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

// providerTraitsLocked is a provider's traits document and its
// last-modified time.
func (c *Cloud) providerTraitsLocked(pr *provider) (map[string]any, time.Time) {
	return map[string]any{"traits": slices.Clone(pr.traits), "resource_provider_generation": pr.generation}, c.traitsModifiedLocked(pr.traits)
}

// traitsModifiedLocked is _serialize_traits' last-modified: the newest
// trait's created_at, or now when there are none.
func (c *Cloud) traitsModifiedLocked(names []string) time.Time {
	var lm time.Time
	for _, t := range names {
		if ct := c.traits[t]; ct.After(lm) {
			lm = ct
		}
	}
	if lm.IsZero() {
		lm = c.now()
	}
	return lm
}

var traitNameRe = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

// putProviderTraits is PUT /resource_providers/{uuid}/traits, checked
// against the provider generation.
func (p *placementCtx) putProviderTraits(uuid string) {
	var raw map[string]json.RawMessage
	if !p.readJSON(&raw) {
		return
	}
	for k := range raw {
		if k != "traits" && k != "resource_provider_generation" {
			p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: Additional properties are not allowed ('%s' was unexpected)", k), "")
			return
		}
	}
	for _, k := range []string{"traits", "resource_provider_generation"} {
		if _, ok := raw[k]; !ok {
			p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: '%s' is a required property", k), "")
			return
		}
	}
	var traits []string
	if err := json.Unmarshal(raw["traits"], &traits); err != nil {
		p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: %s is not of type 'array'", string(raw["traits"])), "")
		return
	}
	for _, t := range traits {
		if len(t) < 1 || len(t) > 255 {
			p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: '%s' is too long", t), "")
			return
		}
	}
	var gen int64
	if err := json.Unmarshal(raw["resource_provider_generation"], &gen); err != nil {
		p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: %s is not of type 'integer'", string(raw["resource_provider_generation"])), "")
		return
	}
	c := p.c
	pr := p.lockProvider(uuid, p.notFoundProvider)
	if pr == nil {
		return
	}
	if pr.generation != gen {
		c.mu.Unlock()
		p.fail(http.StatusConflict, "Resource provider's generation already changed. Please update the generation and try again.", "placement.concurrent_update")
		return
	}
	var missing []string
	for _, t := range traits {
		if _, ok := c.traits[t]; !ok && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		c.mu.Unlock()
		p.fail(http.StatusBadRequest, "No such trait "+strings.Join(missing, ", "), "")
		return
	}
	c.setProviderTraitsLocked(pr, traits, false)
	body, lm := c.providerTraitsLocked(pr)
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

// deleteProviderTraits is DELETE /resource_providers/{uuid}/traits.
func (p *placementCtx) deleteProviderTraits(uuid string) {
	c := p.c
	pr := p.lockProvider(uuid, p.notFoundProvider)
	if pr == nil {
		return
	}
	c.setProviderTraitsLocked(pr, nil, false)
	c.mu.Unlock()
	p.ok(http.StatusNoContent, nil, time.Time{})
}

// listTraits is GET /traits[?name=in:|startswith:...&associated=...].
func (p *placementCtx) listTraits() {
	q := p.r.URL.Query()
	for k := range q {
		if k != "name" && k != "associated" {
			p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid query string parameters: Additional properties are not allowed ('%s' was unexpected)", k), "")
			return
		}
	}
	var in []string
	prefix := ""
	if v, ok := q["name"]; ok {
		op, val, found := strings.Cut(v[len(v)-1], ":")
		if !found {
			p.fail(http.StatusBadRequest, fmt.Sprintf("Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"%s\"", v[len(v)-1]), "")
			return
		}
		switch op {
		case "in":
			in = strings.Split(val, ",")
		case "startswith":
			prefix = val
		}
	}
	var assoc *bool
	if v, ok := q["associated"]; ok {
		switch strings.ToLower(v[len(v)-1]) {
		case "true":
			b := true
			assoc = &b
		case "false":
			b := false
			assoc = &b
		default:
			p.fail(http.StatusBadRequest, `The query parameter "associated" only accepts "true" or "false"`, "")
			return
		}
	}
	c := p.c
	c.mu.Lock()
	used := map[string]bool{}
	for _, pr := range c.providers {
		for _, t := range pr.traits {
			used[t] = true
		}
	}
	var names []string
	for t := range c.traits {
		if in != nil && !slices.Contains(in, t) || !strings.HasPrefix(t, prefix) || assoc != nil && used[t] != *assoc {
			continue
		}
		names = append(names, t)
	}
	sort.Strings(names)
	lm := c.traitsModifiedLocked(names)
	c.mu.Unlock()
	if names == nil {
		names = []string{}
	}
	p.ok(http.StatusOK, map[string]any{"traits": names}, lm)
}

// getTrait is GET /traits/{name}.
func (p *placementCtx) getTrait(name string) {
	c := p.c
	c.mu.Lock()
	created, ok := c.traits[name]
	c.mu.Unlock()
	if !ok {
		p.fail(http.StatusNotFound, fmt.Sprintf("No such trait(s): %s.", name), "")
		return
	}
	p.ok(http.StatusNoContent, nil, created)
}

// putTrait is PUT /traits/{name} (CUSTOM_* only; 201 new, 204 existing).
func (p *placementCtx) putTrait(name string) {
	if len(name) > 255 || !traitNameRe.MatchString(name) {
		p.fail(http.StatusBadRequest, `The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"`, "")
		return
	}
	c := p.c
	c.mu.Lock()
	created, ok := c.traits[name]
	status := http.StatusNoContent
	if !ok {
		created = c.now()
		c.traits[name] = created
		status = http.StatusCreated
	}
	c.mu.Unlock()
	p.w.Header().Set("Location", "http://"+p.r.Host+placementPrefix+"/traits/"+name)
	p.ok(status, nil, created)
}

// deleteTrait is DELETE /traits/{name} (custom and unused only).
func (p *placementCtx) deleteTrait(name string) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.traits[name]; !ok {
		p.fail(http.StatusNotFound, fmt.Sprintf("No such trait(s): %s.", name), "")
		return
	}
	if !strings.HasPrefix(name, "CUSTOM_") {
		p.fail(http.StatusBadRequest, fmt.Sprintf("Cannot delete standard trait %s.", name), "")
		return
	}
	for _, pr := range c.providers {
		if slices.Contains(pr.traits, name) {
			p.fail(http.StatusConflict, fmt.Sprintf("The trait %s is in use by a resource provider.", name), "")
			return
		}
	}
	delete(c.traits, name)
	p.ok(http.StatusNoContent, nil, time.Time{})
}
