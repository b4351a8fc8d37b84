package operations

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// novaVersion is the compute microversion the runner uses: 2.74 lets a
// server create name its destination with host/hypervisor_hostname
// (OPENSTACK.md §9 "Nova create on a chosen node"), and 2.61 and later list
// flavor extra_specs in /flavors/detail.
const novaVersion = "2.74"

// server is what the runner reads of a Nova server.
type server struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Status             string `json:"status"`
	TaskState          string `json:"OS-EXT-STS:task_state"`
	HypervisorHostname string `json:"OS-EXT-SRV-ATTR:hypervisor_hostname"`
	Fault              *struct {
		Message string `json:"message"`
		Details string `json:"details"`
	} `json:"fault"`
}

// compute returns the Nova client at novaVersion, or nil when the site has
// no Nova.
func (r *Runner) compute() *gophercloud.ServiceClient {
	if r.nova == nil {
		return nil
	}
	c := *r.nova
	c.Microversion = novaVersion
	return &c
}

// getServer reads a server; errNotFound for a 404 or a DELETED one.
func (r *Runner) getServer(ctx context.Context, id string) (*server, error) {
	c := r.compute()
	return call(ctx, r, "nova: get server", func(ctx context.Context) (*server, error) {
		var out struct {
			Server server `json:"server"`
		}
		_, err := c.Get(ctx, c.ServiceURL("servers", url.PathEscape(id)), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return nil, fmt.Errorf("nova server %s: %w", id, errNotFound)
		}
		if err != nil {
			return nil, err
		}
		if out.Server.Status == "DELETED" || out.Server.Status == "SOFT_DELETED" {
			return nil, fmt.Errorf("nova server %s (%s): %w", id, out.Server.Status, errNotFound)
		}
		return &out.Server, nil
	})
}

// serversNamed lists the credential's servers whose name is exactly name
// (Nova's name filter is a regular expression).
func (r *Runner) serversNamed(ctx context.Context, name string) ([]server, error) {
	c := r.compute()
	return call(ctx, r, "nova: find server by name", func(ctx context.Context) ([]server, error) {
		var out struct {
			Servers []server `json:"servers"`
		}
		u := c.ServiceURL("servers", "detail") + "?name=" + url.QueryEscape("^"+regexp.QuoteMeta(name)+"$")
		_, err := c.Get(ctx, u, &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		var exact []server
		for _, s := range out.Servers {
			if s.Name == name && s.Status != "DELETED" && s.Status != "SOFT_DELETED" {
				exact = append(exact, s)
			}
		}
		return exact, err
	})
}

type flavor struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	ExtraSpecs map[string]string `json:"extra_specs"`
}

// findFlavor resolves a flavor id or name; with want == "" it picks the
// flavor asking for one unit of the node's resource class
// ("resources:CUSTOM_<RC>" = "1"). errNotFound when nothing matches.
func (r *Runner) findFlavor(ctx context.Context, want, resourceClass string) (*flavor, error) {
	c := r.compute()
	if want != "" {
		f, err := call(ctx, r, "nova: get flavor", func(ctx context.Context) (*flavor, error) {
			var out struct {
				Flavor flavor `json:"flavor"`
			}
			_, err := c.Get(ctx, c.ServiceURL("flavors", url.PathEscape(want)), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
			if openstack.StatusCode(err) == http.StatusNotFound {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return &out.Flavor, nil
		})
		if err != nil || f != nil {
			return f, err
		}
	}
	all, err := call(ctx, r, "nova: list flavors", func(ctx context.Context) ([]flavor, error) {
		var out struct {
			Flavors []flavor `json:"flavors"`
		}
		_, err := c.Get(ctx, c.ServiceURL("flavors", "detail")+"?is_public=None", &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return out.Flavors, err
	})
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

// findImage resolves an image name to its id through Glance (GET
// /v2/images?name=); an id-like value is returned as is, and without a
// Glance client the value is passed to Nova unchanged.
func (r *Runner) findImage(ctx context.Context, image string) (string, error) {
	if isUUID(image) || r.image == nil {
		return image, nil
	}
	ids, err := call(ctx, r, "glance: find image", func(ctx context.Context) ([]string, error) {
		var out struct {
			Images []struct {
				ID string `json:"id"`
			} `json:"images"`
		}
		_, err := r.image.Get(ctx, r.image.ServiceURL("images")+"?name="+url.QueryEscape(image), &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
		var ids []string
		for _, i := range out.Images {
			ids = append(ids, i.ID)
		}
		return ids, err
	})
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

// createServer POSTs /v2.1/servers targeted at the node (hypervisor_hostname
// = node UUID, microversion 2.74) and returns the new server's id.
func (r *Runner) createServer(ctx context.Context, name, flavorID, imageID, keyName, userData string, networks []string, nodeUUID string) (string, error) {
	c := r.compute()
	s := map[string]any{
		"name": name, "flavorRef": flavorID, "imageRef": imageID,
		"hypervisor_hostname": nodeUUID,
		"networks":            "none",
	}
	if len(networks) > 0 {
		var nets []map[string]string
		for _, n := range networks {
			nets = append(nets, map[string]string{"uuid": n})
		}
		s["networks"] = nets
	}
	if keyName != "" {
		s["key_name"] = keyName
	}
	if userData != "" {
		s["user_data"] = base64.StdEncoding.EncodeToString([]byte(userData))
	}
	var out struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	// Not retried: a lost answer would boot a second server. The next pass
	// finds the server by name instead.
	_, err := c.Post(ctx, c.ServiceURL("servers"), map[string]any{"server": s}, &out, &gophercloud.RequestOpts{OkCodes: []int{202}})
	return out.Server.ID, err
}

// deleteServer DELETEs a server; a 404 counts as done.
func (r *Runner) deleteServer(ctx context.Context, id string) error {
	c := r.compute()
	_, err := call(ctx, r, "nova: delete server", func(ctx context.Context) (struct{}, error) {
		_, err := c.Delete(ctx, c.ServiceURL("servers", url.PathEscape(id)), &gophercloud.RequestOpts{OkCodes: []int{204}})
		if openstack.StatusCode(err) == http.StatusNotFound {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	return err
}

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

func isUUID(s string) bool { return uuidRe.MatchString(s) }
