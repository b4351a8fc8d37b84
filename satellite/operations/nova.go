package operations

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ironlink/ironlink/satellite/nova"
)

// server is what the runner reads of a Nova server.
type server = nova.Server

// flavor is a Nova flavor with its extra_specs.
type flavor = nova.Flavor

// getServer reads a server; errNotFound for an unknown or DELETED one.
func (r *Runner) getServer(ctx context.Context, id string) (*server, error) {
	s, err := r.nova.GetServer(ctx, id)
	if errors.Is(err, nova.ErrServerNotFound) {
		return nil, fmt.Errorf("nova server %s: %w", id, errNotFound)
	}
	if err != nil {
		return nil, err
	}
	if s.Deleted() {
		return nil, fmt.Errorf("nova server %s (%s): %w", id, s.Status, errNotFound)
	}
	return &s, nil
}

// findFlavor resolves a flavor id or name; with want == "" it picks the
// flavor asking for one unit of the node's resource class
// ("resources:CUSTOM_<RC>" = "1"). errNotFound when nothing matches.
func (r *Runner) findFlavor(ctx context.Context, want, resourceClass string) (*flavor, error) {
	if want != "" {
		f, err := r.nova.Flavor(ctx, want)
		if err == nil {
			return &f, nil
		}
		if !errors.Is(err, nova.ErrFlavorNotFound) {
			return nil, err
		}
	}
	all, err := r.nova.Flavors(ctx)
	if err != nil {
		return nil, err
	}
	rcKey := "resources:" + resourceClassName(resourceClass)
	for i, f := range all {
		if want != "" && f.Name == want {
			return &all[i], nil
		}
		if want == "" && resourceClass != "" && f.ExtraSpecs[rcKey] == "1" {
			return &all[i], nil
		}
	}
	if want == "" {
		return nil, fmt.Errorf("no flavor asks for %s=1 (the node's resource class %q): %w", rcKey, resourceClass, errNotFound)
	}
	return nil, fmt.Errorf("flavor %q: %w", want, errNotFound)
}

// resourceClassName is Nova's custom resource class of an Ironic node's
// resource_class: upper-cased, non-alphanumerics to "_", "CUSTOM_" prefix.
func resourceClassName(rc string) string {
	var b strings.Builder
	for _, ch := range strings.ToUpper(rc) {
		if (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') {
			b.WriteRune(ch)
		} else {
			b.WriteByte('_')
		}
	}
	return "CUSTOM_" + b.String()
}

// findImage resolves an image name to its id through Glance; an id-like
// value is returned as is, and without Glance the value is passed to Nova
// unchanged.
func (r *Runner) findImage(ctx context.Context, image string) (string, error) {
	if isUUID(image) || r.images == nil {
		return image, nil
	}
	ids, err := r.images.ImageIDs(ctx, image)
	if err != nil {
		return "", err
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("image %q: %w", image, errNotFound)
	case 1:
		return ids[0], nil
	default:
		return "", fmt.Errorf("image name %q is ambiguous (%d images): give the id", image, len(ids))
	}
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

func isUUID(s string) bool { return uuidRe.MatchString(s) }
