// Package gate applies the hub's desired impairment state of one device to
// OpenStack as the CUSTOM_CUSTOMER_READY trait (SPEC "Who owns the trait",
// docs/design/openstack.md §3.2–§3.3):
//
//   - The Ironic node trait is the source of truth at every site
//     (PUT/DELETE /v1/nodes/{id}/traits/{trait}). Nova's ironic driver
//     copies a node's traits onto its resource provider, so a trait written
//     only to Placement would be undone within a resource-tracker cycle.
//   - Where the site has Placement, the node's resource provider (uuid =
//     node uuid) is written too, so the gate takes effect at once instead
//     of after Nova's next sync: removed on quarantine, added on release
//     (the custom trait is created first), always as a one-trait delta with
//     the provider generation.
//   - Standalone-Ironic sites (no Nova, no Placement) use the node trait
//     alone; Ironic's allocation API (1.52+) can match on node traits, so
//     one mechanism serves both site kinds.
//
// Order and failure policy: a quarantine closes the gate on both even if
// one write fails (fail-closed: the Placement write still happens when the
// Ironic one failed, and the error is returned so the hub retries); a
// release writes Ironic first and opens Placement only after Ironic
// succeeded, so a failure never leaves the gate open on Placement alone.
// Every write is idempotent; Apply can be repeated (the 15-min resync does).
package gate
