// Package openstacksim is a fast, in-process fake of the three OpenStack
// services the satellite talks to — Keystone (identity), Ironic (baremetal)
// and Placement — that answers like the real services of the test bed
// (shared/openstack-testbed: Keystone 22, Ironic 21.4 with API max 1.82,
// Placement 8.0 with max 1.39).
//
// One HTTP listener, always on a loopback address, serves all three under
// path prefixes:
//
//	/identity/v3   Keystone v3 (application-credential tokens and catalog)
//	/baremetal     Ironic root (version document); the API is /baremetal/v1
//	/placement     Placement root (version document and API)
//
// What "answers like the real services" means here was checked against the
// installed Python source (ironic 21.4.4, placement 8.0.0, keystone 22.0.2,
// keystonemiddleware 10.1.0, pecan 1.4.1, WebOb 1.8.6):
//
//   - Ironic: microversion headers on /v1 API responses, 406 above the
//     maximum or for fields newer than the requested version, the
//     {"error_message": "<JSON string>"} error envelope (faultcode/
//     faultstring/debuginfo for API errors, pecan's code/title/description
//     for routing errors), limit/marker paging with a "next" URL only on a
//     full page that keeps only sort_key, sort_dir, truthy associated/
//     maintenance/retired, detail and fields (every other filter is dropped),
//     404 NodeNotFound for an unknown marker, 400 for fields that are not
//     node fields (updated_at, created_at, ...), 409 NodeLocked while a node
//     has a reservation, trait validation (CUSTOM_* or os-traits standard,
//     at most 50 per node), 404 when deleting a trait the node lacks.
//   - Placement: "OpenStack-API-Version: placement X" request/response
//     headers with "vary", 406 above the maximum, errors as
//     {"errors": [{status, title, detail, code (1.23+), request_id}]} with
//     WebOb's detail text, generation-checked PUT of provider traits (409
//     placement.concurrent_update), 400 for unknown traits, 201/204 trait
//     creation, required= filtering (1.18+, "!" from 1.22, "in:" from 1.39).
//   - Keystone: application-credential tokens (201 + X-Subject-Token, token
//     body with catalog), 401 for a wrong secret or for a request that also
//     asks for a scope, 404 for an unknown credential id; Ironic and
//     Placement reject a missing, unknown or expired token with
//     keystonemiddleware's 401 body and WWW-Authenticate header.
//
// Seen on the test bed and reproduced here (compared response by response,
// status, headers and body, against a running test bed):
//
//   - Ironic reads the microversion only from X-OpenStack-Ironic-API-Version;
//     "OpenStack-API-Version: baremetal X" alone leaves the request at 1.1.
//   - A node list whose fields= names a field that is not a DB column —
//     conductor, allocation_uuid, chassis_uuid, links or a typo — is a 500
//     "type object 'Node' has no attribute 'X'"; created_at/updated_at are a
//     400 "Field X is not a valid field." (a single-node GET accepts the
//     computed fields).
//   - Routing errors (unknown path, bad node identifier, wrong method) carry
//     no microversion headers; below 1.37 GET …/traits is 406, PUT 405 and
//     DELETE 404.
//   - Seeded nodes are owned by the credential's project; a PUT of an
//     unchanged trait set to Placement does not bump the generation.
//
// Known, deliberate differences: links and Location headers carry the
// /baremetal and /placement prefixes; a locked node answers 409 at once
// (the real conductor retries for about 2 s first); Placement's jsonschema
// messages stop after their first line; driver_internal_info is empty;
// application-credential access rules are reported in the token but not
// enforced; only nodes (list, detail, get, create, patch, delete,
// maintenance, traits, states) exist in Ironic, and Placement's resources=
// filter is ignored (member_of= matches nothing).
//
// Besides serving HTTP, a [Cloud] is driven from Go: add and change nodes and
// providers ([Cloud.AddNode], [Cloud.UpdateNode], [Cloud.SetProviderTraits]),
// seed the test bed's fleet ([Cloud.SeedLikeTestbed]), inject faults
// ([Cloud.InjectFault]), look at what clients did ([Cloud.Requests]), expire
// tokens ([Cloud.ExpireTokens]) and let a fleet change on its own
// ([Cloud.Churn], for the demo).
//
// The binary in cmd/ironlink-openstacksim serves a seeded, churning cloud
// for `make demo`.
package openstacksim
