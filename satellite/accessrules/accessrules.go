// Package accessrules holds the Keystone application-credential access rules
// the satellite needs, derived from the tables of calls its OpenStack clients
// make (satellite/openstack, satellite/ironic, satellite/placement). The file
// deploy/openstack/access-rules.yaml is rendered from Rules; a test keeps the
// two in step, and the end-to-end suite checks every request the satellite
// made against the file. deploy/openstack/operations-access-rules.yaml is
// rendered from OperationsRules the same way, for the operations credential.
//
// Rule shape and matching follow the Keystone API reference, "Application
// Credentials": a rule is {service, method, path}; in path, "*" matches one
// segment, "**" any number of segments, and a {named} placeholder is "*".
package accessrules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/operations"
	"github.com/ironlink/ironlink/satellite/placement"
)

// Rule is one Keystone access rule.
type Rule struct {
	// Service is the catalog service type ("baremetal", "placement", "compute").
	Service string `json:"service" yaml:"service"`
	// Method is the HTTP method.
	Method string `json:"method" yaml:"method"`
	// Path is the path template, with "*" for one segment.
	Path string `json:"path" yaml:"path"`
}

// Rules returns every rule the satellite's code needs, sorted by service,
// path and method, without duplicates.
func Rules() []Rule {
	var calls []openstack.APICall
	calls = append(calls, openstack.APICalls()...)
	calls = append(calls, ironic.APICalls()...)
	calls = append(calls, placement.APICalls()...)
	calls = append(calls, nova.APICalls()...)
	return rulesOf(calls)
}

// OperationsRules returns every rule the operations credential needs
// (satellite/operations: its calls plus the Ironic version documents that
// connecting reads, but no Placement), sorted like [Rules];
// deploy/openstack/operations-access-rules.yaml is rendered from it.
func OperationsRules() []Rule {
	var calls []openstack.APICall
	for _, c := range openstack.APICalls() {
		if c.Service == "baremetal" {
			calls = append(calls, c)
		}
	}
	calls = append(calls, operations.APICalls()...)
	return rulesOf(calls)
}

func rulesOf(calls []openstack.APICall) []Rule {
	out := make([]Rule, 0, len(calls))
	for _, c := range calls {
		r := Rule{Service: c.Service, Method: c.Method, Path: c.Path}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Rule) int {
		return strings.Compare(a.Service+" "+a.Path+" "+a.Method, b.Service+" "+b.Path+" "+b.Method)
	})
	return out
}

// Render returns the file content for rules: a JSON list of {service,
// method, path}, one rule per line. JSON is also YAML, and it is what
// `openstack application credential create --access-rules <file>` reads
// (python-openstackclient json.load()s the file), so the file carries no
// comments; docs/reference/access.md "OpenStack access rules" explains it.
func Render(rules []Rule) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, r := range rules {
		line, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("render access rules: %w", err)
		}
		b.WriteString("  ")
		b.Write(line)
		if i < len(rules)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes(), nil
}

// Parse reads an access-rules YAML file.
func Parse(b []byte) ([]Rule, error) {
	var rules []Rule
	if err := yaml.Unmarshal(b, &rules); err != nil {
		return nil, fmt.Errorf("parse access rules: %w", err)
	}
	return rules, nil
}

// Allows reports whether rule r permits a request (Keystone's matching:
// "*" one segment, "**" any number of segments, "{name}" like "*").
func (r Rule) Allows(service, method, path string) bool {
	if r.Service != service || !strings.EqualFold(r.Method, method) {
		return false
	}
	return matchSegments(split(r.Path), split(path))
}

func split(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func matchSegments(pat, segs []string) bool {
	for i, p := range pat {
		if p == "**" {
			for j := i; j <= len(segs); j++ {
				if matchSegments(pat[i+1:], segs[j:]) {
					return true
				}
			}
			return false
		}
		if i >= len(segs) {
			return false
		}
		if p != "*" && !(strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}")) && p != segs[i] {
			return false
		}
	}
	return len(pat) == len(segs)
}

// AnyAllows reports whether one of rules permits the request.
func AnyAllows(rules []Rule, service, method, path string) bool {
	for _, r := range rules {
		if r.Allows(service, method, path) {
			return true
		}
	}
	return false
}
