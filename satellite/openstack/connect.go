package openstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
)

// Placement modes for [Config].Placement.
const (
	// PlacementAuto uses Placement when the Keystone catalog lists a
	// "placement" endpoint and runs standalone otherwise.
	PlacementAuto = "auto"
	// PlacementOn requires Placement; Connect fails without it.
	PlacementOn = "on"
	// PlacementOff never uses Placement (standalone Ironic site).
	PlacementOff = "off"
)

// Config says which cloud to use and whether the site has Placement.
type Config struct {
	// CloudsYAML is the path of clouds.yaml; "" uses gophercloud's search
	// path ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack,
	// /etc/openstack).
	CloudsYAML string
	// Cloud is the entry under "clouds:"; "" uses $OS_CLOUD.
	Cloud string
	// Placement is PlacementAuto (also for ""), PlacementOn or PlacementOff.
	Placement string
	// Nova is NovaAuto (also for ""), NovaOn or NovaOff: whether the orphan
	// sweep reads Nova. A standalone site (no Placement) never uses Nova.
	Nova string
	// AuthGuard, when set, wraps re-authentication with backoff and is told
	// the outcome of the first authentication (see [AuthGuard]).
	AuthGuard *AuthGuard
	// WrapTransport, when set, wraps the HTTP transport of every request
	// after the first authentication (for example to count requests).
	WrapTransport func(http.RoundTripper) http.RoundTripper
	// AllowInsecureTLS lets a clouds.yaml with verify: false through
	// (--openstack-insecure-skip-verify); without it [Check] refuses such a
	// cloud, since it silently turns off TLS verification towards OpenStack.
	AllowInsecureTLS bool
}

// Nova modes for [Config].Nova.
const (
	// NovaAuto reads Nova when the catalog lists a "compute" endpoint.
	NovaAuto = "auto"
	// NovaOn requires Nova; Connect fails without it.
	NovaOn = "on"
	// NovaOff never reads Nova: orphan detection is off.
	NovaOff = "off"
)

// Clients is an authenticated connection to one site.
type Clients struct {
	// Provider holds the Keystone token; it re-authenticates by itself on a
	// 401 and shortly before the token expires. Safe for concurrent use.
	Provider *gophercloud.ProviderClient
	// Baremetal is the Ironic client, Microversion set to IronicVersion.
	Baremetal *gophercloud.ServiceClient
	// Placement is the Placement client, Microversion set to
	// PlacementVersion; nil on a standalone site.
	Placement *gophercloud.ServiceClient
	// Compute is the Nova client (base API 2.1); nil when the site has no
	// Nova or it is turned off.
	Compute *gophercloud.ServiceClient
	// IronicVersion is the negotiated Ironic microversion, e.g. "1.65".
	IronicVersion string
	// PlacementVersion is the negotiated Placement microversion, e.g.
	// "1.39"; "" on a standalone site.
	PlacementVersion string
}

// Standalone reports whether the site runs without Placement (and Nova).
func (c *Clients) Standalone() bool { return c.Placement == nil }

// maxReauthMargin is how long before expiry a token is renewed at most
// (docs/design/openstack.md §6: ReauthBeforeTokenExpiration, new in gophercloud v2.16).
const maxReauthMargin = 5 * time.Minute

// httpTimeout is a last-resort bound on any single HTTP exchange; callers
// put tighter per-attempt deadlines on their contexts.
const httpTimeout = 2 * time.Minute

// ErrConfig marks errors that retrying cannot fix: an unreadable or
// incomplete clouds.yaml, an unknown cloud name, a bad placement mode.
var ErrConfig = errors.New("configuration error")

// Connect reads cfg.Cloud from clouds.yaml, authenticates, and returns
// clients for Ironic and (per cfg.Placement) Placement with negotiated
// microversions. It follows docs/design/openstack.md §5.3 and §6:
//
//   - [Check] first: clouds.Parse (WithLocations(cfg.CloudsYAML) when set) gives the auth
//     options, endpoint options (region, interface) and TLS config (cacert,
//     cert/key, verify);
//   - AllowReauth is forced on; the provider client uses a token lock and
//     renews the token min(5 min, token lifetime/4) before it expires;
//   - Ironic: "GET /v1" (falling back to "GET /") → min(max, 1.65), at
//     least 1.37; Placement: "GET /" → min(max, 1.39), at least 1.6.
//
// Errors: a clouds.yaml problem or incomplete auth options ([Check];
// wrapping [ErrConfig], reported to cfg.AuthGuard as False/ConfigInvalid),
// a refused credential (check [IsAuthError]),
// no baremetal endpoint, Placement missing with PlacementOn, a version
// document that cannot be read, or a service too old. With PlacementAuto a
// catalog that lists Placement whose version document cannot be read is an
// error, not a silent fall-back to standalone: a site's kind must not flip
// because of an outage.
func Connect(ctx context.Context, cfg Config, log *slog.Logger) (*Clients, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	checked, err := Check(cfg)
	if err != nil {
		if cfg.AuthGuard != nil {
			cfg.AuthGuard.Observe(err) // False/ConfigInvalid: no token was asked for
		}
		return nil, err
	}
	if cfg.AuthGuard != nil {
		cfg.AuthGuard.setMethod(checked.Method)
	}
	pc, err := authenticate(ctx, cfg, checked, log)
	if err != nil {
		return nil, err
	}
	c := &Clients{Provider: pc}
	if err := connectIronic(ctx, c, cfg, checked.Endpoint, log); err != nil {
		return nil, err
	}
	found, err := connectPlacement(ctx, c, cfg, checked, log)
	if err != nil {
		return nil, err
	}
	if !found {
		return c, nil // standalone: no Placement, no Nova
	}
	if err := connectNova(ctx, c, cfg, checked, log); err != nil {
		return nil, err
	}
	return c, nil
}

// authenticate gets the first token and returns the provider client, set
// up for renewal, the auth guard and cfg.WrapTransport.
func authenticate(ctx context.Context, cfg Config, checked Checked, log *slog.Logger) (*gophercloud.ProviderClient, error) {
	ao := checked.Auth
	// WithTLSConfig(nil) keeps the default transport (no TLS settings in
	// clouds.yaml). The first token request is bounded like the guard's.
	actx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	pc, err := config.NewProviderClient(actx, ao,
		config.WithHTTPClient(http.Client{Timeout: httpTimeout}),
		config.WithTLSConfig(checked.TLS))
	if err != nil && isLocalAuthError(err) {
		// Check builds the same request body, so this is a safety net.
		err = fmt.Errorf("openstack: cloud %q (%s): %w: %w", cfg.Cloud, checked.Method, ErrConfig, err)
	}
	if cfg.AuthGuard != nil {
		cfg.AuthGuard.Observe(err)
	}
	if err != nil {
		if errors.Is(err, ErrConfig) {
			return nil, err
		}
		if IsAuthError(err) {
			return nil, fmt.Errorf("openstack: cloud %q: Keystone refused the credential (%s): %w", cfg.Cloud, checked.Method.refusedHint(), err)
		}
		return nil, fmt.Errorf("openstack: cloud %q: authenticate at %s: %w", cfg.Cloud, ao.IdentityEndpoint, err)
	}
	pc.UseTokenLock()
	if cfg.WrapTransport != nil {
		pc.HTTPClient.Transport = cfg.WrapTransport(pc.HTTPClient.Transport)
	}
	if cfg.AuthGuard != nil {
		cfg.AuthGuard.Install(pc)
	}
	pc.ReauthBeforeTokenExpiration = reauthMargin(pc.TokenExpiry(), time.Now())
	pc.UserAgent.Prepend("ironlink-satellite")
	log.Info("authenticated to Keystone", "cloud", cfg.Cloud, "identity", ao.IdentityEndpoint,
		"token_expires", pc.TokenExpiry(), "reauth_margin", pc.ReauthBeforeTokenExpiration)
	return pc, nil
}

// connectIronic finds the baremetal endpoint and negotiates Ironic's
// microversion into c.
func connectIronic(ctx context.Context, c *Clients, cfg Config, eo gophercloud.EndpointOpts, log *slog.Logger) error {
	pc := c.Provider
	// gophercloud's endpoint lookup also fetches the endpoint's version
	// document (one GET, no retry of its own), so transient failures are
	// retried here.
	bm, _, err := Retry(ctx, versionPolicy(), log, "find baremetal endpoint", nil, func(context.Context) (*gophercloud.ServiceClient, error) {
		return gcopenstack.NewBareMetalV1(pc, eo)
	})
	if err != nil {
		return fmt.Errorf("openstack: cloud %q: baremetal endpoint: %w", cfg.Cloud, err)
	}
	rng, err := ironicVersions(ctx, pc, bm, log)
	if err != nil {
		return fmt.Errorf("openstack: ironic at %s: %w", bm.Endpoint, err)
	}
	iv, err := rng.Negotiate("ironic", IronicPreferred, IronicRequired)
	if err != nil {
		return fmt.Errorf("openstack: ironic at %s: %w", bm.Endpoint, err)
	}
	bm.Microversion = iv.String()
	c.Baremetal, c.IronicVersion = bm, iv.String()
	log.Info("ironic microversion negotiated", "endpoint", bm.ResourceBaseURL(), "server_min", rng.Min.String(), "server_max", rng.Max.String(), "using", c.IronicVersion)
	return nil
}

// connectPlacement finds Placement and negotiates its microversion into c;
// found is false on a standalone site (off by configuration, or absent from
// the catalog with PlacementAuto).
func connectPlacement(ctx context.Context, c *Clients, cfg Config, checked Checked, log *slog.Logger) (found bool, err error) {
	if checked.Placement == PlacementOff {
		log.Info("placement disabled by configuration: standalone site")
		return false, nil
	}
	pc, eo := c.Provider, checked.Endpoint
	pl, _, err := Retry(ctx, versionPolicy(), log, "find placement endpoint", nil, func(context.Context) (*gophercloud.ServiceClient, error) {
		return gcopenstack.NewPlacementV1(pc, eo)
	})
	if err != nil {
		var nf *gophercloud.ErrEndpointNotFound
		if checked.Placement == PlacementAuto && (errors.As(err, &nf) || isEndpointNotFound(err)) {
			log.Info("no placement endpoint in the catalog: standalone site", "cloud", cfg.Cloud)
			return false, nil
		}
		return false, fmt.Errorf("openstack: cloud %q: placement endpoint: %w", cfg.Cloud, err)
	}
	prng, err := placementVersions(ctx, pc, pl, log)
	if err != nil {
		return false, fmt.Errorf("openstack: placement at %s: %w", pl.Endpoint, err)
	}
	pv, err := prng.Negotiate("placement", PlacementPreferred, PlacementRequired)
	if err != nil {
		return false, fmt.Errorf("openstack: placement at %s: %w", pl.Endpoint, err)
	}
	pl.Microversion = pv.String()
	c.Placement, c.PlacementVersion = pl, pv.String()
	log.Info("placement microversion negotiated", "endpoint", pl.Endpoint, "server_min", prng.Min.String(), "server_max", prng.Max.String(), "using", c.PlacementVersion)
	return true, nil
}

// connectNova finds the compute endpoint into c, unless Nova is off or,
// with NovaAuto, absent from the catalog.
func connectNova(ctx context.Context, c *Clients, cfg Config, checked Checked, log *slog.Logger) error {
	if checked.Nova == NovaOff {
		log.Info("nova disabled by configuration: no orphan detection")
		return nil
	}
	pc, eo := c.Provider, checked.Endpoint
	cp, _, err := Retry(ctx, versionPolicy(), log, "find compute endpoint", nil, func(context.Context) (*gophercloud.ServiceClient, error) {
		return gcopenstack.NewComputeV2(pc, eo)
	})
	if err != nil {
		var nf *gophercloud.ErrEndpointNotFound
		if checked.Nova == NovaAuto && (errors.As(err, &nf) || isEndpointNotFound(err)) {
			log.Info("no compute endpoint in the catalog: no orphan detection", "cloud", cfg.Cloud)
			return nil
		}
		return fmt.Errorf("openstack: cloud %q: compute endpoint: %w", cfg.Cloud, err)
	}
	c.Compute = cp
	log.Info("nova found", "endpoint", cp.Endpoint)
	return nil
}

// isEndpointNotFound also matches a value-typed ErrEndpointNotFound.
func isEndpointNotFound(err error) bool {
	var v gophercloud.ErrEndpointNotFound
	return errors.As(err, &v)
}

// reauthMargin is how long before expiry the token is renewed: at most
// maxReauthMargin and at most a quarter of the remaining lifetime, so a
// short-lived token (a test Keystone, a tight site policy) does not make
// every request re-authenticate (gophercloud: "the margin should be smaller
// than the token lifetime").
func reauthMargin(expiry, now time.Time) time.Duration {
	if expiry.IsZero() {
		return maxReauthMargin
	}
	life := expiry.Sub(now)
	if life <= 0 {
		return time.Second
	}
	return min(maxReauthMargin, life/4)
}

// versionPolicy retries version-document reads on transient failures.
func versionPolicy() RetryPolicy {
	p := DefaultRetryPolicy()
	p.Budget = 30 * time.Second
	p.AttemptTimeout = 15 * time.Second
	return p
}

type rawDoc struct {
	body   []byte
	header http.Header
}

// getDoc fetches a version document without a microversion header
// (version documents are served without authentication in stock
// deployments; the token is sent anyway and is harmless).
func getDoc(ctx context.Context, pc *gophercloud.ProviderClient, url string, log *slog.Logger) (rawDoc, error) {
	d, _, err := Retry(ctx, versionPolicy(), log, "GET "+url, nil, func(ctx context.Context) (rawDoc, error) {
		resp, err := pc.Request(ctx, http.MethodGet, url, &gophercloud.RequestOpts{
			OkCodes:          []int{http.StatusOK, http.StatusMultipleChoices},
			KeepResponseBody: true,
		})
		if err != nil {
			return rawDoc{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return rawDoc{}, err
		}
		return rawDoc{body: b, header: resp.Header}, nil
	})
	return d, err
}

// headerRange reads Ironic's X-OpenStack-Ironic-API-{Minimum,Maximum}-Version
// headers (Ironic api-ref "API versions": sent on every response).
func headerRange(h http.Header) (VersionRange, bool) {
	hi, err := ParseMicroversion(h.Get("X-OpenStack-Ironic-API-Maximum-Version"))
	if err != nil {
		return VersionRange{}, false
	}
	lo, err := ParseMicroversion(h.Get("X-OpenStack-Ironic-API-Minimum-Version"))
	if err != nil {
		lo = Microversion{hi.Major, 1}
	}
	return VersionRange{Min: lo, Max: hi}, true
}

// ironicVersions reads Ironic's microversion range from "GET /v1" (body
// "version" object, else the response headers), falling back to "GET /".
func ironicVersions(ctx context.Context, pc *gophercloud.ProviderClient, bm *gophercloud.ServiceClient, log *slog.Logger) (VersionRange, error) {
	var errs []error
	for _, u := range []string{bm.ResourceBaseURL(), bm.Endpoint} {
		d, err := getDoc(ctx, pc, u, log)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r, err := ParseVersionDocument(d.body, 1); err == nil {
			return r, nil
		} else if r, ok := headerRange(d.header); ok {
			return r, nil
		} else {
			errs = append(errs, fmt.Errorf("GET %s: %w", u, err))
		}
	}
	return VersionRange{}, fmt.Errorf("cannot read the version document: %w", errors.Join(errs...))
}

// placementVersions reads Placement's microversion range from "GET /".
func placementVersions(ctx context.Context, pc *gophercloud.ProviderClient, pl *gophercloud.ServiceClient, log *slog.Logger) (VersionRange, error) {
	d, err := getDoc(ctx, pc, pl.Endpoint, log)
	if err != nil {
		return VersionRange{}, fmt.Errorf("cannot read the version document: %w", err)
	}
	r, err := ParseVersionDocument(d.body, 1)
	if err != nil {
		return VersionRange{}, fmt.Errorf("GET %s: %w", pl.Endpoint, err)
	}
	return r, nil
}
