// Package openstacksim is a fast, in-process fake of the four OpenStack
// services the satellite talks to — Keystone (identity), Ironic (baremetal),
// Placement and Nova (compute) — that answers like the real services of the
// test bed (shared/openstack-testbed: Keystone 22, Ironic 21.4 with API max
// 1.82, Placement 8.0 with max 1.39, Nova 26 with max 2.93).
//
// One HTTP listener, always on a loopback address, serves them under path
// prefixes:
//
//	/identity/v3   Keystone v3 (application-credential tokens and catalog)
//	/baremetal     Ironic root (version document); the API is /baremetal/v1
//	/placement     Placement root (version document and API)
//	/compute       Nova version list; the API (catalog URL) is /compute/v2.1
//
// Nova is present by default; [Options.NoNova] and [Options.NoPlacement] (a
// standalone-Ironic site) leave it out of the catalog and make /compute 404.
//
// What "answers like the real services" means here was checked against the
// installed Python source (ironic 21.4.4, placement 8.0.0, keystone 22.0.2,
// keystonemiddleware 10.1.0, pecan 1.4.1, WebOb 1.8.6, nova 26.2.2):
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
//   - Nova (nova 26.2.2, microversion_parse, keystonemiddleware):
//     "OpenStack-API-Version: compute X" (wins) or
//     X-OpenStack-Nova-API-Version request headers, both echoed with two
//     Vary headers, no header = 2.1, "latest" = 2.93, 406 computeFault
//     "Version X is not supported by the API. Minimum is 2.1 and maximum is
//     2.93." (with the version headers), 400 badRequest for a malformed
//     version (without them); version documents without a token; GET
//     /v2.1/servers and /servers/detail with limit (capped at [api]max_limit,
//     1000), marker (400 "marker [X] not found" for an unknown id, a
//     deleted server is still a valid marker), servers_links rel=next only
//     when the page is full (parameters sorted, marker last), newest first
//     (created_at desc, id desc); all_tenants (bool_from_string, 400 for a
//     bad value; 403 "Policy doesn't allow
//     os_compute_api:servers:detail:get_all_tenants to be performed." for a
//     non-admin — all_tenants is not silently dropped, unlike node= and
//     host=, which a non-admin loses); deleted rows hidden unless an admin
//     passes deleted=true (then only deleted and soft-deleted servers);
//     status filter (case-insensitive; 400 "Invalid status value" from
//     2.38, empty list before); GET /v2.1/servers/{id} of an unknown or
//     deleted id → 404 {"itemNotFound": {"code": 404, "message": "Instance
//     X could not be found."}}; the server view per microversion
//     (OS-EXT-SRV-ATTR:* only for admin, the 2.3 extras, locked 2.9,
//     host_status 2.16, description 2.19, tags 2.26, flavor body 2.47,
//     trusted_image_certificates 2.63, server_groups on GET 2.71,
//     locked_reason 2.73, OS-EXT-SRV-ATTR:hostname for non-admins 2.90);
//     bodies use Python's json separators; x-openstack-request-id and
//     x-compute-request-id carry the same id.
//   - Keystone: application-credential tokens (201 + X-Subject-Token, token
//     body with catalog), 401 for a wrong secret or for a request that also
//     asks for a scope, 404 for an unknown credential id; Ironic,
//     Placement and Nova reject a missing, unknown or expired token with
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
//   - Nova with the Ironic driver: a server on a node has
//     OS-EXT-SRV-ATTR:host "testbed-compute" and hypervisor_hostname = the
//     node UUID, the node's instance_uuid = the server id; the detail
//     fields, null/"" values (key_name null, config_drive "", accessIPv4 "",
//     addresses {}, no security_groups key without ports), launched_at
//     "YYYY-MM-DDTHH:MM:SS.000000", root_device_name "/dev/sda", the next
//     link, limit=0 (empty page, no link), limit= with no value (400 "is too short"),
//     all_tenants=maybe and the routing 404 (HTML) were compared with the
//     test bed's answers.
//
// Known, deliberate differences: links and Location headers carry the
// /baremetal, /placement and /compute prefixes; a locked node answers 409 at once
// (the real conductor retries for about 2 s first); Placement's jsonschema
// messages stop after their first line; driver_internal_info is empty;
// application-credential access rules are reported in the token but not
// enforced; only nodes (list, detail, get, create, patch, delete,
// maintenance, traits, states, provision and power actions), ports (list,
// create) and drivers (list) exist in Ironic, and Placement's resources=
// filter is ignored (member_of= matches nothing). Nova's servers change
// over HTTP only by create (POST /v2.1/servers, targeted with
// hypervisor_hostname from 2.74) and delete, and otherwise through the Go
// API; flavors list the one flavor baremetal.gpu-h100; other methods get 405
// badMethod, and other paths a routing 404; of the list
// filters only status, name, node, host, deleted and (with all_tenants)
// tenant_id/project_id are applied, others (changes-since, sort_key, ip, …)
// are accepted and ignored and sort_key is not validated; JSON keys come
// out sorted rather than in Nova's order; every server has the same image
// and flavor (baremetal.gpu-h100), no fault, no addresses; ACTIVE servers
// have power_state 1 (the test bed's fake-hardware servers showed 4);
// [Options.NovaNonAdmin] changes only Nova's policy decisions, not the
// token's roles.
//
// Besides serving HTTP, a [Cloud] is driven from Go: add and change nodes,
// providers and servers ([Cloud.AddNode], [Cloud.UpdateNode],
// [Cloud.SetProviderTraits], [Cloud.AddServer], [Cloud.UpdateServer],
// [Cloud.DeleteServer]), seed the test bed's fleet with matching Nova
// servers ([Cloud.SeedLikeTestbed]) and deliberate orphans
// ([Cloud.SeedOrphans]), inject faults
// ([Cloud.InjectFault]), look at what clients did ([Cloud.Requests]), expire
// tokens ([Cloud.ExpireTokens]) and let a fleet change on its own
// ([Cloud.Churn], for the demo; Nova's servers follow deploys and
// tear-downs, so churn makes no orphans).
//
// Operations (provision.go): PUT …/states/provision runs Ironic's state
// sequences in the background, one state every [Options.ProvisionStep]
// (manage: verifying → manageable, setting a power state; inspect:
// inspecting → inspect wait → manageable; clean and provide: cleaning ↔
// clean wait → manageable/available, an unknown manual step → clean failed
// with Ironic's "node does not support this clean step" last_error;
// active: deploying ↔ wait call-back → active, needing
// instance_info.image_source; deleted: deleting → cleaning → available;
// adopt (adopt.go): adopting → active, or adopt failed with Ironic's
// last_error after [Cloud.FailNextAdoption]; abort from the wait states → the matching failed state), with 400
// InvalidStateRequested for a transition the state does not allow and 409
// NodeLocked while the conductor works; [Cloud.HoldWaitStates] holds them
// in a wait state. A Nova boot lands on the chosen available node (ERROR
// "No valid host was found." otherwise), which then deploys like Ironic's.
// Deliberate differences: Ironic answers clean/inspect of fake-hardware at
// once (no wait states) and real Nova learns a new node only after its
// resource tracker ran; the simulator waits in every wait state and knows
// nodes at once.
//
// The binary in cmd/ironlink-openstacksim serves a seeded, churning cloud
// for `make demo`.
package openstacksim
