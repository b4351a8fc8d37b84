package openstacksim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
)

// Ironic node traits: GET, PUT and DELETE /v1/nodes/{ident}/traits[/{trait}].

var customTraitRe = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

// ironicTraitError validates a trait like TRAITS_SCHEMA and returns the
// args.schema error message, or "".
func ironicTraitError(name, t string) string {
	if len(t) >= 1 && len(t) <= 255 && (customTraitRe.MatchString(t) || slices.Contains(standardTraits, t)) {
		return ""
	}
	if len(t) < 1 {
		return fmt.Sprintf("Schema error for %s: '' is too short", name)
	}
	if len(t) > 255 {
		return fmt.Sprintf("Schema error for %s: '%s' is too long", name, t)
	}
	return fmt.Sprintf("Schema error for %s: '%s' is not valid under any of the given schemas. Possible root cause: '%s' does not match '^CUSTOM_[A-Z0-9_]+$'", name, t, t)
}

const maxTraitsPerNode = 50

// ironicTraitsGet is GET /v1/nodes/{ident}/traits.
func (c *Cloud) ironicTraitsGet(w http.ResponseWriter, _ *http.Request, ver int, ident string) {
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		traits := slices.Clone(rec.n.Traits)
		if traits == nil {
			traits = []string{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"traits": traits})
	})
}

// ironicTraitsPut is PUT /v1/nodes/{ident}/traits/{trait} (single: add one
// trait, no body) and PUT /v1/nodes/{ident}/traits (replace all).
func (c *Cloud) ironicTraitsPut(w http.ResponseWriter, r *http.Request, ver int, ident, trait string, single bool) {
	body, ok := readOptionalJSONObject(w, r)
	if !ok {
		return
	}
	if single {
		if msg := ironicTraitError("trait", trait); msg != "" {
			ironicError(w, http.StatusBadRequest, msg)
			return
		}
	}
	traits, hasTraits, msg := traitsFromBody(body)
	if msg != "" {
		ironicError(w, http.StatusBadRequest, msg)
		return
	}
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		if (trait != "" && hasTraits) || !(trait != "" || hasTraits) {
			ironicError(w, http.StatusBadRequest, "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body.")
			return
		}
		if trait != "" && len(body) > 0 {
			ironicError(w, http.StatusBadRequest, "No body should be provided when adding a trait")
			return
		}
		if !c.lockLocked(w, rec) {
			return
		}
		if trait != "" {
			if !slices.Contains(rec.n.Traits, trait) {
				if len(rec.n.Traits)+1 > maxTraitsPerNode {
					ironicError(w, http.StatusBadRequest, tooManyTraits(rec, len(rec.n.Traits)+1))
					return
				}
				rec.n.Traits = append(rec.n.Traits, trait)
			}
			w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+ident+"/traits/"+trait)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		set := map[string]bool{}
		for _, t := range traits {
			set[t] = true
		}
		if len(set) > maxTraitsPerNode {
			ironicError(w, http.StatusBadRequest, tooManyTraits(rec, len(set)))
			return
		}
		rec.n.Traits = sortedKeys(set)
		w.WriteHeader(http.StatusNoContent)
	})
}

// traitsFromBody validates a {"traits": [...]} body (TRAITS_SCHEMA) and
// returns the traits and whether the key was there, or a 400 message.
func traitsFromBody(body map[string]any) (traits []string, hasTraits bool, msg string) {
	_, hasTraits = body["traits"]
	if body == nil {
		return nil, hasTraits, ""
	}
	for k := range body {
		if k != "traits" {
			return nil, hasTraits, fmt.Sprintf("Schema error for body: Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	list, ok := body["traits"].([]any)
	if hasTraits && !ok {
		return nil, hasTraits, fmt.Sprintf("Schema error for body: %v is not of type 'array'", body["traits"])
	}
	for _, v := range list {
		s, _ := v.(string)
		if msg := ironicTraitError("body", s); msg != "" {
			return nil, hasTraits, msg
		}
		traits = append(traits, s)
	}
	return traits, hasTraits, ""
}

// tooManyTraits is the 400 message for a node that would get n traits.
func tooManyTraits(rec *nodeRec, n int) string {
	return fmt.Sprintf("Could not modify traits for node %d as it would exceed the maximum number of traits per node (%d vs. %d)", rec.id, n, maxTraitsPerNode)
}

// ironicTraitsDelete is DELETE /v1/nodes/{ident}/traits[/{trait}].
func (c *Cloud) ironicTraitsDelete(w http.ResponseWriter, _ *http.Request, ver int, ident, trait string) {
	c.withReservedNode(w, ver, ident, func(rec *nodeRec) {
		if trait == "" {
			rec.n.Traits = []string{}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		i := slices.Index(rec.n.Traits, trait)
		if i < 0 {
			ironicError(w, http.StatusNotFound, fmt.Sprintf("Node %s doesn't have a trait '%s'", rec.n.UUID, trait))
			return
		}
		rec.n.Traits = slices.Delete(rec.n.Traits, i, i+1)
		w.WriteHeader(http.StatusNoContent)
	})
}
