package openstacksim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Request and response helpers the four services share.

// writeBody writes a complete response with its Content-Type and
// Content-Length.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// apiVersionHeader returns the version "OpenStack-API-Version: <service> X"
// asks for (the last one naming the service, over all the header's
// values), or "".
func apiVersionHeader(h http.Header, service string) string {
	vals := strings.Split(strings.Join(h.Values("Openstack-Api-Version"), ","), ",")
	for i := len(vals) - 1; i >= 0; i-- {
		f := strings.Fields(vals[i])
		if len(f) >= 2 && strings.EqualFold(f[0], service) {
			if v := strings.TrimSpace(strings.Join(f[1:], " ")); v != "" {
				return v
			}
		}
	}
	return ""
}

// writeJSON writes v as an application/json body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error": "encoding failed"}`)
	}
	writeBody(w, status, "application/json", b)
}

// marshalJSON encodes like Python's json.dumps would as far as clients can
// tell: no HTML escaping of <, > and &.
func marshalJSON(v any) ([]byte, error) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(sb.String(), "\n")), nil
}

// apiErr is an API error a handler's step found, answered by the handler
// in its service's format (ironicError, novaError).
type apiErr struct {
	status int
	msg    string
}

// apiErrf makes an apiErr with a formatted message.
func apiErrf(status int, format string, args ...any) *apiErr {
	return &apiErr{status: status, msg: fmt.Sprintf(format, args...)}
}

// readJSONBody reads a request body (at most 4 MiB).
func readJSONBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, 4<<20))
}

// writeRaw writes an injected fault's body as given.
func writeRaw(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
