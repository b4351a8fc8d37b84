package openstacksim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Fixed identifiers of the simulated Keystone.
const (
	regionName       = "RegionOne"
	defaultDomainID  = "default"
	simProjectName   = "site"
	simUserName      = "site-agent"
	keystoneUnauthMs = "The request you have made requires authentication."
)

// keystoneError writes Keystone's error body ({"error": {code, message,
// title}}, keys sorted as flask.jsonify does) and, for 401, its
// WWW-Authenticate header. identityBase is URL()+"/identity".
func keystoneError(w http.ResponseWriter, status int, message, identityBase string) {
	keystoneErrorExtra(w, status, message, identityBase, false)
}

func keystoneErrorExtra(w http.ResponseWriter, status int, message, identityBase string, authPlugin bool) {
	body := map[string]any{"code": status, "message": message, "title": http.StatusText(status)}
	if authPlugin {
		// AuthPluginException adds the (empty) identity methods hint.
		body["identity"] = map[string]any{}
	}
	if status == http.StatusUnauthorized {
		// keystone's base_url: the configured public endpoint (the test
		// bed's ends in /v3)
		w.Header().Set("WWW-Authenticate", fmt.Sprintf("Keystone uri=%q", identityBase+"/v3"))
	}
	w.Header().Set("Vary", "X-Auth-Token")
	w.Header().Set("X-Openstack-Request-Id", requestID())
	writeJSON(w, status, map[string]any{"error": body})
}

// middleware401 is keystonemiddleware's rejection of a missing, unknown or
// expired token at Ironic, Placement and Nova.
func (c *Cloud) middleware401(w http.ResponseWriter) {
	// www_authenticate_uri of the test bed's [keystone_authtoken] is the
	// Keystone v3 URL.
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Keystone uri=%q", c.URL()+identityPrefix+"/v3"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`)
}

func keystoneTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func (c *Cloud) identityVersion(base string) map[string]any {
	return map[string]any{
		"id":      "v3.14",
		"status":  "stable",
		"updated": "2020-04-07T00:00:00Z",
		"links":   []any{map[string]any{"rel": "self", "href": base + "/v3/"}},
		"media-types": []any{map[string]any{
			"base": "application/json",
			"type": "application/vnd.openstack.identity-v3+json",
		}},
	}
}

func (c *Cloud) serveIdentity(w http.ResponseWriter, r *http.Request, rel string) {
	base := "http://" + r.Host + identityPrefix
	switch {
	case rel == "" || rel == "/", rel == "/v3" || rel == "/v3/":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			keystoneError(w, http.StatusMethodNotAllowed, "The method is not allowed for the requested URL.", base)
			return
		}
		w.Header().Set("Vary", "X-Auth-Token")
		if strings.HasPrefix(rel, "/v3") {
			writeJSON(w, http.StatusOK, map[string]any{"version": c.identityVersion(base)})
			return
		}
		writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{c.identityVersion(base)}}})
	case rel == "/v3/auth/tokens":
		switch r.Method {
		case http.MethodPost:
			c.issueToken(w, r, base)
		case http.MethodGet, http.MethodHead:
			// A token restricted by access rules may not call Keystone
			// itself, not even to validate itself (seen on the test bed).
			subject := r.Header.Get("X-Subject-Token")
			if subject == "" {
				keystoneError(w, http.StatusNotFound, "No token in the request", base)
				return
			}
			keystoneError(w, http.StatusNotFound, "Failed to validate token", base)
		default:
			keystoneError(w, http.StatusMethodNotAllowed, "The method is not allowed for the requested URL.", base)
		}
	default:
		keystoneError(w, http.StatusNotFound, "The resource could not be found.", base)
	}
}

func validationError(attribute, target string) string {
	return fmt.Sprintf("Expecting to find %s in %s. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.", attribute, target)
}

// keystoneErr is a Keystone error found while checking a token request.
type keystoneErr struct {
	status     int
	msg        string
	authPlugin bool // AuthPluginException (adds the identity hint)
}

// issueToken implements POST /v3/auth/tokens for the application_credential
// method, in the order Keystone checks: body shape, method payloads, "no
// scope with an application credential", credential lookup (404), secret
// (401).
func (c *Cloud) issueToken(w http.ResponseWriter, r *http.Request, base string) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	cred, e := parseAppCredAuth(body)
	if e == nil {
		e = c.checkAppCredential(cred)
	}
	if e != nil {
		keystoneErrorExtra(w, e.status, e.msg, base, e.authPlugin)
		return
	}

	now := c.now()
	tokID := "gAAAAAB" + base64.RawURLEncoding.EncodeToString([]byte(randomHex(90)))[:176]
	c.mu.Lock()
	c.tokens[tokID] = &token{issued: now, expires: now.Add(c.opts.TokenTTL)}
	c.issued++
	c.auditSeq++
	c.mu.Unlock()

	tok := c.tokenDocument(now)
	if _, nocatalog := r.URL.Query()["nocatalog"]; !nocatalog {
		tok["catalog"] = c.catalog()
	}
	w.Header().Set("X-Subject-Token", tokID)
	w.Header().Set("Vary", "X-Auth-Token")
	w.Header().Set("X-Openstack-Request-Id", requestID())
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok})
}

// parseAppCredAuth checks the body's shape and identity methods and
// returns the application_credential payload.
func parseAppCredAuth(body []byte) (map[string]json.RawMessage, *keystoneErr) {
	var req struct {
		Auth *struct {
			Identity *struct {
				Methods []string                   `json:"methods"`
				AppCred map[string]json.RawMessage `json:"application_credential"`
			} `json:"identity"`
			Scope json.RawMessage `json:"scope"`
		} `json:"auth"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &keystoneErr{status: http.StatusBadRequest, msg: "Invalid JSON in request body."}
	}
	if req.Auth == nil {
		return nil, &keystoneErr{status: http.StatusBadRequest, msg: validationError("auth", "request body")}
	}
	if req.Auth.Identity == nil {
		return nil, &keystoneErr{status: http.StatusBadRequest, msg: "'identity' is a required property"}
	}
	id := req.Auth.Identity
	hasAppCred := false
	for _, m := range id.Methods {
		switch m {
		case "application_credential":
			hasAppCred = true
			if id.AppCred == nil {
				return nil, &keystoneErr{status: http.StatusBadRequest, msg: validationError("application_credential", "identity")}
			}
		case "password", "token", "totp", "mapped", "oauth1":
			// Known methods, but the simulated Keystone has no users with
			// passwords and issues only application-credential tokens.
		default:
			return nil, &keystoneErr{status: http.StatusUnauthorized, msg: "Attempted to authenticate with an unsupported method."}
		}
	}
	if !hasAppCred {
		return nil, &keystoneErr{status: http.StatusUnauthorized, msg: keystoneUnauthMs}
	}
	if len(req.Auth.Scope) > 0 {
		return nil, &keystoneErr{status: http.StatusUnauthorized, msg: "Error authenticating with application credential: Application credentials cannot request a scope.", authPlugin: true}
	}
	return id.AppCred, nil
}

// checkAppCredential finds the credential by id (404 when unknown) or by
// name and user (401), then checks the secret (401).
func (c *Cloud) checkAppCredential(cred map[string]json.RawMessage) *keystoneErr {
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(cred[k], &s)
		return s
	}
	credID, name, secret := str("id"), str("name"), str("secret")
	switch {
	case credID != "":
		if credID != c.appCredID {
			return &keystoneErr{status: http.StatusNotFound, msg: fmt.Sprintf("Could not find Application Credential: %s.", credID)}
		}
	case name != "":
		var user struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(cred["user"], &user)
		if name != c.appCredName || user.ID != c.userID {
			return &keystoneErr{status: http.StatusUnauthorized, msg: keystoneUnauthMs}
		}
	default:
		return &keystoneErr{status: http.StatusBadRequest, msg: validationError("name or ID", "application credential")}
	}
	if secret != c.appCredSecret {
		return &keystoneErr{status: http.StatusUnauthorized, msg: keystoneUnauthMs}
	}
	return nil
}

// tokenDocument is the token body (without the catalog) of a token issued
// at now.
func (c *Cloud) tokenDocument(now time.Time) map[string]any {
	return map[string]any{
		"methods": []string{"application_credential"},
		"user": map[string]any{
			"domain":              map[string]any{"id": defaultDomainID, "name": "Default"},
			"id":                  c.userID,
			"name":                simUserName,
			"password_expires_at": nil,
		},
		"audit_ids":  []string{base64.RawURLEncoding.EncodeToString([]byte(randomHex(8)))[:22]},
		"expires_at": keystoneTime(now.Add(c.opts.TokenTTL)),
		"issued_at":  keystoneTime(now),
		"project": map[string]any{
			"domain": map[string]any{"id": defaultDomainID, "name": "Default"},
			"id":     c.projectID,
			"name":   simProjectName,
		},
		"is_domain": false,
		"roles": []any{
			map[string]any{"id": "b1a5c0f6c4a54a8f9c2f7b1c5d6e7f80", "name": "admin"},
			map[string]any{"id": "c2b6d1a7d5b65b9a0d3a8c2d6e7f8091", "name": "member"},
			map[string]any{"id": "d3c7e2b8e6c76c0b1e4b9d3e7f8091a2", "name": "reader"},
		},
		"application_credential": map[string]any{
			"id":           c.appCredID,
			"name":         c.appCredName,
			"restricted":   true,
			"access_rules": c.accessRules(),
		},
	}
}

// accessRules are the test bed's access rules of the agent credential
// (reported in the token; the simulator does not enforce them).
func (c *Cloud) accessRules() []any {
	var rules []any
	add := func(service, path string, methods ...string) {
		for _, m := range methods {
			rules = append(rules, map[string]any{"id": randomHex(16), "method": m, "path": path, "service": service})
		}
	}
	add("baremetal", "/v1/**", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
	add("placement", "/**", "GET", "HEAD", "POST", "PUT", "DELETE")
	add("compute", "/v2.1/**", "GET", "HEAD", "POST", "PUT", "DELETE")
	return rules
}

// catalog is the service catalog: identity, baremetal, (unless
// NoPlacement) placement and (unless NoNova or NoPlacement) compute, each
// with public, internal and admin endpoints in RegionOne. Nova's URL ends in
// /v2.1 like the test bed's (http://127.0.0.1:18774/v2.1).
func (c *Cloud) catalog() []any {
	base := c.URL()
	type svc struct{ typ, name, url, id string }
	svcs := []svc{
		{"identity", "keystone", base + identityPrefix + "/v3", "9f1c6c1e0c3b4b0f8d6e5a4b3c2d1e0f"},
		{"baremetal", "ironic", base + baremetalPrefix, "8e0b5b0d9b2a4a9e7c5d4f3a2b1c0d9e"},
	}
	if !c.opts.NoPlacement {
		svcs = append(svcs, svc{"placement", "placement", base + placementPrefix, "7d9a4a9c8a1b4b8d6b4c3e2f1a0b9c8d"})
	}
	if c.novaEnabled() {
		svcs = append(svcs, svc{"compute", "nova", base + computePrefix + "/v2.1", "6c8f3f8b7f0a4a7c5a3b2d1e0f9a8b7c"})
	}
	out := make([]any, 0, len(svcs))
	for i, s := range svcs {
		var eps []any
		for j, iface := range []string{"public", "internal", "admin"} {
			eps = append(eps, map[string]any{
				"id":        fmt.Sprintf("%s%02d%02d", s.id[:28], i, j),
				"interface": iface,
				"region_id": regionName,
				"region":    regionName,
				"url":       s.url,
			})
		}
		out = append(out, map[string]any{"endpoints": eps, "id": s.id, "type": s.typ, "name": s.name})
	}
	return out
}

// CloudsYAML returns a clouds.yaml document with one cloud named cloudName:
// auth_type v3applicationcredential, auth_url URL()+"/identity/v3", the
// simulated application credential's id and secret, region RegionOne,
// interface public. gophercloud v2's openstack/config/clouds.Parse accepts
// it. Call it after [Cloud.Start] (the URL is part of the document).
func (c *Cloud) CloudsYAML(cloudName string) []byte {
	return []byte(fmt.Sprintf(`clouds:
  %s:
    auth_type: v3applicationcredential
    auth:
      auth_url: %s
      application_credential_id: %q
      application_credential_secret: %q
    region_name: %s
    interface: public
    identity_api_version: 3
`, cloudName, c.URL()+identityPrefix+"/v3", c.appCredID, c.appCredSecret, regionName))
}

// WriteCloudsYAML writes [Cloud.CloudsYAML] to path with mode 0600 (it holds
// a secret).
func (c *Cloud) WriteCloudsYAML(path, cloudName string) error {
	return os.WriteFile(path, c.CloudsYAML(cloudName), 0o600)
}

// ApplicationCredential returns the id and secret of the simulated
// application credential (the ones in [Cloud.CloudsYAML]).
func (c *Cloud) ApplicationCredential() (id, secret string) {
	return c.appCredID, c.appCredSecret
}

// ProjectID returns the id of the project the application credential is
// scoped to (the token's project).
func (c *Cloud) ProjectID() string { return c.projectID }

// ExpireTokens makes every token issued so far invalid: Ironic, Placement
// and Nova answer 401 for them. Tokens issued afterwards are valid again.
func (c *Cloud) ExpireTokens() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tokens {
		t.revoked = true
	}
}

// TokensIssued returns how many tokens Keystone has issued since New.
func (c *Cloud) TokensIssued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.issued
}

// validToken reports whether the X-Auth-Token of r is a live token.
func (c *Cloud) validToken(r *http.Request) bool {
	id := r.Header.Get("X-Auth-Token")
	if id == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[id]
	return ok && !t.revoked && c.now().Before(t.expires)
}
