// Package ironic reads bare-metal nodes from OpenStack Ironic and writes the
// node traits the satellite owns; for the operations credential it also
// makes the provisioning calls (provision.go: create nodes and ports,
// patch, set traits, change provision states, list drivers). It is the
// production implementation of site.Ironic.
//
// It follows the Ironic API reference (Bare Metal API v1: "Nodes" —
// GET /v1/nodes, GET /v1/nodes/{node_ident}; "Node Traits" —
// GET/PUT/DELETE /v1/nodes/{node_ident}/traits[/{trait}]) and the hazards in
// docs/design/openstack.md §1:
//
//   - The listing builds every page URL itself (full query + marker,
//     limit=1000) instead of following Ironic's "next" link, which drops
//     most filters from page 2 on and may carry the wrong scheme/host behind a
//     proxy (§1.4). "next" is only used as a hint that more pages exist.
//   - A marker that vanished between two pages (404) restarts the whole
//     listing, a bounded number of times (§1.4).
//   - Only the fields the conditions need are requested, and only those the
//     negotiated microversion allows (a newer field is a 406; updated_at is
//     a 400 on the test bed, §8). Fields the version lacks are reported in
//     [Node].Missing.
//   - Every node of every answer is checked for each field asked for: a key
//     that is absent (some Ironic versions, proxies and microversion
//     mismatches drop fields from later pages or single reads) is reported
//     in [Node].Unsent, never decoded as "" — null and "" are values, absent
//     is not. gophercloud's nodes.Node cannot tell these apart (§6).
//   - Timestamps without a UTC offset decode as UTC; an unparsable one
//     decodes as the zero time with a warning instead of failing the page
//     (gophercloud fails the whole page, §6).
//   - 502/503/504 and timeouts are retried with jittered backoff within a
//     budget; trait writes also retry 409 (NodeLocked). A listing that still
//     fails returns an error and no nodes: a partial list must never be
//     mistaken for a complete one (SPEC: a failed or partial listing never
//     marks devices removed).
//
// The provisioning calls retry 409 NodeLocked (only) and 502/503/504 per
// WriteRetry, and otherwise return OpenStack's answer unwrapped.
//
// The Client needs a ServiceClient whose Microversion was negotiated by
// satellite/openstack.Connect (at least 1.37).
package ironic
