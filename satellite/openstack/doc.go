// Package openstack connects the satellite to one site's OpenStack: it reads
// clouds.yaml, authenticates against Keystone (application credentials in
// production), finds the Bare Metal (Ironic) and, where the site has one,
// Placement endpoints in the catalog, and negotiates the microversion of each.
//
// It follows docs/design/openstack.md §5.3 (clouds.yaml) and §6 (gophercloud v2 calls and
// gaps):
//
//   - clouds.Parse never sets AllowReauth; Connect sets it, so an expired or
//     revoked token is renewed on the next 401, and also sets
//     ProviderClient.ReauthBeforeTokenExpiration so a token about to expire is
//     renewed before the request that would have carried it.
//   - Microversions are negotiated from the services' version documents
//     (Ironic "GET /v1", Placement "GET /"), never assumed: Ironic gets
//     min(server maximum, 1.65) and must offer at least 1.37 (node traits);
//     Placement gets min(server maximum, 1.39) and must offer at least 1.6
//     (traits).
//   - gophercloud retries neither 409 nor 502/503/504; [Retry] and
//     [IsTransient] are the shared retry policy that the ironic and placement
//     packages build on.
//
// Errors from Keystone (401, an unusable credential) can be recognised with
// [IsAuthError] so that the caller can report "AuthenticationFailed" instead
// of crash-looping (SPEC "Identity and access").
package openstack
