package openstack

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/ironlink/ironlink/internal/boundedread"
)

// AuthMethod is how a cloud in clouds.yaml authenticates to Keystone.
type AuthMethod string

// Auth methods [Check] recognises.
const (
	// AuthApplicationCredential: application_credential_id or _name with a
	// secret (the way SPEC asks sites to authenticate).
	AuthApplicationCredential AuthMethod = "application credential"
	// AuthPassword: a user (name in a domain, or id) and a password.
	AuthPassword AuthMethod = "password"
	// AuthToken: an existing token.
	AuthToken AuthMethod = "token"
)

// refusedHint is what to look at when Keystone answers 401 to a token
// request made with method m.
func (m AuthMethod) refusedHint() string {
	switch m {
	case AuthPassword:
		return "wrong or changed password, disabled or deleted user, or no role on the project?"
	case AuthToken:
		return "expired or revoked token?"
	}
	return "expired, deleted or rotated application credential?"
}

// checkHint is the log hint after a failed token request made with method m.
func (m AuthMethod) checkHint() string {
	switch m {
	case AuthPassword:
		return "check the user, password, domain and project in clouds.yaml"
	case AuthToken:
		return "check the token in clouds.yaml"
	}
	return "check the application credential in clouds.yaml"
}

// methodOf says how ao authenticates, by the same precedence as
// gophercloud's token request (password first, then token, then
// application credential).
func methodOf(ao gophercloud.AuthOptions) AuthMethod {
	switch {
	case ao.Password != "" || ao.Passcode != "":
		return AuthPassword
	case ao.TokenID != "":
		return AuthToken
	case ao.ApplicationCredentialID != "" || ao.ApplicationCredentialName != "":
		return AuthApplicationCredential
	case ao.Username != "" || ao.UserID != "":
		return AuthPassword
	}
	return AuthApplicationCredential
}

// Checked is what [Check] read from a valid configuration.
type Checked struct {
	// Auth and Endpoint are the cloud's auth and endpoint options
	// (AllowReauth on); TLS is its TLS configuration (nil: defaults).
	Auth     gophercloud.AuthOptions
	Endpoint gophercloud.EndpointOpts
	TLS      *tls.Config
	// Method is how the cloud authenticates.
	Method AuthMethod
	// Placement and Nova are the normalised modes (PlacementAuto, ...).
	Placement, Nova string
	// InsecureTLS is true when clouds.yaml says verify: false and
	// Config.AllowInsecureTLS let it through: OpenStack's certificates are
	// not verified.
	InsecureTLS bool
}

// CheckModes checks cfg's Placement and Nova modes ("" counts as auto) and
// returns them normalised. Errors wrap [ErrConfig] and name the flag.
func CheckModes(cfg Config) (placement, nova string, err error) {
	placement = strings.ToLower(strings.TrimSpace(cfg.Placement))
	if placement == "" {
		placement = PlacementAuto
	}
	switch placement {
	case PlacementAuto, PlacementOn, PlacementOff:
	default:
		return "", "", fmt.Errorf("openstack: placement mode %q (--placement): want auto, on or off: %w", cfg.Placement, ErrConfig)
	}
	nova = strings.ToLower(strings.TrimSpace(cfg.Nova))
	if nova == "" {
		nova = NovaAuto
	}
	switch nova {
	case NovaAuto, NovaOn, NovaOff:
	default:
		return "", "", fmt.Errorf("openstack: nova mode %q (--nova): want auto, on or off: %w", cfg.Nova, ErrConfig)
	}
	if placement == PlacementOff && nova == NovaOn {
		return "", "", fmt.Errorf("openstack: nova on with placement off: a standalone site has no Nova: %w", ErrConfig)
	}
	return placement, nova, nil
}

// Check reads cfg.Cloud from clouds.yaml and checks, without sending any
// request, everything a token request needs: the modes (CheckModes), the
// file and the cloud entry (gophercloud's clouds.Parse: file found and
// parsed, cloud present, TLS files readable), and complete auth options —
// the request body gophercloud would send is built, so a password cloud
// without a user domain, a project name without a project domain or an
// application credential without a secret fail here with gophercloud's own
// message. A cloud with verify: false is refused unless
// cfg.AllowInsecureTLS (then Checked.InsecureTLS). Connect runs it first; `ironlink-satellite validate` runs it
// before start. Errors wrap [ErrConfig].
func Check(cfg Config) (Checked, error) {
	var c Checked
	var err error
	if c.Placement, c.Nova, err = CheckModes(cfg); err != nil {
		return Checked{}, err
	}
	opts := []clouds.ParseOption{}
	if cfg.Cloud != "" {
		opts = append(opts, clouds.WithCloudName(cfg.Cloud))
	}
	if cfg.CloudsYAML != "" {
		// gophercloud reads the file without a limit and blocks on a named
		// pipe: check first that it is a regular file of a sane size.
		if _, err := boundedread.File(cfg.CloudsYAML, boundedread.SmallLimit); err != nil {
			return Checked{}, fmt.Errorf("openstack: clouds.yaml: %w: %w", ErrConfig, err)
		}
		opts = append(opts, clouds.WithLocations(cfg.CloudsYAML))
	}
	c.Auth, c.Endpoint, c.TLS, err = clouds.Parse(opts...)
	if err != nil {
		return Checked{}, fmt.Errorf("openstack: read cloud %q from clouds.yaml %q: %w: %w", cfg.Cloud, cfg.CloudsYAML, ErrConfig, err)
	}
	if c.TLS != nil && c.TLS.InsecureSkipVerify {
		if !cfg.AllowInsecureTLS {
			return Checked{}, fmt.Errorf("openstack: cloud %q in clouds.yaml %q says verify: false, which turns off TLS certificate verification towards OpenStack: "+
				"remove it (set cacert to the site's CA instead) or start the satellite with --openstack-insecure-skip-verify: %w", cfg.Cloud, cfg.CloudsYAML, ErrConfig)
		}
		c.InsecureTLS = true
	}
	c.Auth.AllowReauth = true
	c.Method = methodOf(c.Auth)
	if c.Auth.IdentityEndpoint == "" {
		return Checked{}, fmt.Errorf("openstack: cloud %q in clouds.yaml %q: no auth_url: %w", cfg.Cloud, cfg.CloudsYAML, ErrConfig)
	}
	// The same two steps as gophercloud's tokens.Create, on a copy (the
	// scope step fills in a missing Scope).
	ao := c.Auth
	if ao.Scope != nil {
		s := *ao.Scope
		ao.Scope = &s
	}
	scope, err := ao.ToTokenV3ScopeMap()
	if err == nil {
		_, err = ao.ToTokenV3CreateMap(scope)
	}
	if err != nil {
		return Checked{}, fmt.Errorf("openstack: cloud %q in clouds.yaml %q (%s): %w: %w", cfg.Cloud, cfg.CloudsYAML, c.Method, ErrConfig, err)
	}
	return c, nil
}

// isLocalAuthError reports whether err is one of gophercloud's errors for
// auth options that are incomplete or contradictory (raised before any
// request is sent): retrying cannot fix them.
func isLocalAuthError(err error) bool {
	for _, target := range []any{
		&gophercloud.ErrMissingInput{}, &gophercloud.ErrInvalidInput{}, &gophercloud.ErrUsernameOrUserID{},
		&gophercloud.ErrDomainIDOrDomainName{}, &gophercloud.ErrDomainIDWithUserID{}, &gophercloud.ErrDomainNameWithUserID{},
		&gophercloud.ErrMissingPassword{}, &gophercloud.ErrScopeDomainIDOrDomainName{}, &gophercloud.ErrScopeProjectIDOrProjectName{},
		&gophercloud.ErrScopeProjectIDAlone{}, &gophercloud.ErrScopeEmpty{}, &gophercloud.ErrAppCredMissingSecret{},
		&gophercloud.ErrUsernameWithToken{}, &gophercloud.ErrUserIDWithToken{}, &gophercloud.ErrDomainIDWithToken{},
		&gophercloud.ErrDomainNameWithToken{}, &gophercloud.ErrTenantIDProvided{}, &gophercloud.ErrTenantNameProvided{},
		&gophercloud.ErrAPIKeyProvided{},
	} {
		if errors.As(err, target) {
			return true
		}
	}
	return false
}
