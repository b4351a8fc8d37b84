// Package novatemplate holds the named templates for Nova create
// (--nova-templates-file, docs/reference/operations.md "Nova create
// templates"): an image node, a SLURM worker, each an image, a flavor, a
// key pair, user data, networks and server metadata, per site. Parse and
// Load validate the YAML file (unknown keys and bad values refused, naming
// the line); Expand fills a NOVA_CREATE's parameters from the template
// named in them, the fields set explicitly winning.
package novatemplate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/filewatch"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Limits of a template's values (Nova's own limits where it has them).
const (
	// MaxUserDataBytes is the most user data, in bytes (the operations
	// API's limit on params.nova_create.user_data).
	MaxUserDataBytes = 64 << 10
	// MaxMetadata is the most metadata entries (Nova's default quota).
	MaxMetadata = 128
	// MaxNetworks is the most networks of a template.
	MaxNetworks = 16
)

// File is a parsed templates file: its templates in file order. A name
// may appear more than once for different sites; the first template of
// the name that applies to a site is the site's.
type File struct {
	Templates []Template
}

// Template is one named Nova create template.
type Template struct {
	// Name is what operators and ladder steps name ("slurm-worker").
	Name string `yaml:"name"`
	// Sites limits the template to these sites; empty: every site.
	Sites []string `yaml:"sites"`
	// Image is the image name or id (required).
	Image string `yaml:"image"`
	// Flavor is the flavor name or id; empty: the site's flavor for the
	// node's resource class.
	Flavor string `yaml:"flavor"`
	// KeyName is the key pair's name; empty: none.
	KeyName string `yaml:"key_name"`
	// UserData is the user data (plain text, at most MaxUserDataBytes).
	UserData string `yaml:"user_data"`
	// Networks are network ids (UUIDs); empty: the site's networks.
	Networks []string `yaml:"networks"`
	// Metadata is the server metadata (at most MaxMetadata entries, keys
	// and values at most 255 bytes).
	Metadata map[string]string `yaml:"metadata"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Load reads and parses the templates file at p (bounded, a regular file).
func Load(p string) (*File, error) {
	return filewatch.ReadConfig(p, "nova templates file", Parse)
}

// Parse parses a templates file: a `templates:` list. Unknown keys are
// refused with their line (yaml's KnownFields); a bad name, a name used
// twice for one site, a missing image, a network that is not a UUID, or a
// value too long or with control characters is refused naming the line
// and the template. Every problem is reported.
func Parse(data []byte) (*File, error) {
	var doc struct {
		Templates []Template `yaml:"templates"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) { // empty: no templates
		return nil, fmt.Errorf("parse: %w", err)
	}
	var nodes struct {
		Templates []yaml.Node `yaml:"templates"`
	}
	_ = yaml.Unmarshal(data, &nodes) // decoded above: only the lines are taken
	var errs []error
	seen := map[string]bool{}
	for i, t := range doc.Templates {
		where := fmt.Sprintf("templates[%d]", i)
		if i < len(nodes.Templates) {
			where = fmt.Sprintf("line %d: %s", nodes.Templates[i].Line, where)
		}
		if t.Name != "" {
			where += " (" + t.Name + ")"
		}
		if !nameRE.MatchString(t.Name) {
			errs = append(errs, fmt.Errorf("%s: name must be 1-63 of [a-z0-9._-], starting with a letter or digit", where))
		}
		sites := t.Sites
		if len(sites) == 0 {
			sites = []string{""}
		}
		for _, s := range sites {
			if seen[t.Name+"\x00"+s] {
				errs = append(errs, fmt.Errorf("%s: name used twice for site %q", where, s))
			}
			seen[t.Name+"\x00"+s] = true
		}
		errs = append(errs, t.validate(where)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &File{Templates: doc.Templates}, nil
}

func (t Template) validate(where string) []error {
	var errs []error
	if t.Image == "" {
		errs = append(errs, fmt.Errorf("%s: image: required", where))
	}
	for _, f := range []struct{ k, v string }{{"image", t.Image}, {"flavor", t.Flavor}, {"key_name", t.KeyName}} {
		if err := textcheck.Line(f.k, f.v, 255); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	for i, s := range t.Sites {
		if err := textcheck.Line(fmt.Sprintf("sites[%d]", i), s, 255); err != nil || s == "" {
			errs = append(errs, fmt.Errorf("%s: sites[%d] %q is not a site name", where, i, s))
		}
	}
	if err := textcheck.Text("user_data", t.UserData, MaxUserDataBytes); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if len(t.Networks) > MaxNetworks {
		errs = append(errs, fmt.Errorf("%s: networks: %d, at most %d", where, len(t.Networks), MaxNetworks))
	}
	for i, n := range t.Networks {
		if _, err := uuid.Parse(n); err != nil {
			errs = append(errs, fmt.Errorf("%s: networks[%d] %q is not a network id (UUID)", where, i, n))
		}
	}
	return append(errs, CheckMetadata(where+": metadata", t.Metadata)...)
}

// CheckMetadata refuses server metadata Nova would refuse: more than
// MaxMetadata entries, an empty key, keys or values over 255 bytes or with
// control characters. where prefixes the errors.
func CheckMetadata(where string, m map[string]string) []error {
	var errs []error
	if len(m) > MaxMetadata {
		errs = append(errs, fmt.Errorf("%s: %d entries, at most %d", where, len(m), MaxMetadata))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" {
			errs = append(errs, fmt.Errorf("%s: an empty key", where))
		}
		if err := textcheck.Line("key "+textcheck.Quote(k), k, 255); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if err := textcheck.Line("value of "+textcheck.Quote(k), m[k], 255); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errs
}

// Lookup returns the template name for site: the first of that name whose
// Sites is empty or holds site. A nil file has none.
func (f *File) Lookup(site, name string) (Template, bool) {
	if f == nil {
		return Template{}, false
	}
	for _, t := range f.Templates {
		if t.Name == name && (len(t.Sites) == 0 || slices.Contains(t.Sites, site)) {
			return t, true
		}
	}
	return Template{}, false
}

// Expand returns p filled from t: each of image, flavor, key_name,
// user_data and networks that p leaves empty takes t's; metadata is t's
// merged with p's (p's keys win). p is not changed; the template name
// stays in the result so the stored operation records it.
func Expand(t Template, p *ironlinkv1.NovaCreateParams) *ironlinkv1.NovaCreateParams {
	out := &ironlinkv1.NovaCreateParams{Name: p.GetName(), Flavor: p.GetFlavor(), Image: p.GetImage(), KeyName: p.GetKeyName(),
		UserData: p.GetUserData(), Networks: slices.Clone(p.GetNetworks()), ForceClear: p.GetForceClear(), Template: p.GetTemplate()}
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&out.Image, t.Image)
	fill(&out.Flavor, t.Flavor)
	fill(&out.KeyName, t.KeyName)
	fill(&out.UserData, t.UserData)
	if len(out.Networks) == 0 {
		out.Networks = slices.Clone(t.Networks)
	}
	if len(t.Metadata)+len(p.GetMetadata()) > 0 {
		out.Metadata = maps.Clone(t.Metadata)
		if out.Metadata == nil {
			out.Metadata = map[string]string{}
		}
		maps.Copy(out.Metadata, p.GetMetadata())
	}
	return out
}
