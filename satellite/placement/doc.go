// Package placement reads resource providers and writes the
// CUSTOM_CUSTOMER_READY gate trait in OpenStack Placement.
//
// It follows the Placement API reference ("Resource Providers",
// "Resource Provider Traits", "Traits") and docs/design/openstack.md §3:
//
//   - A provider's trait list is replaced as a whole by
//     PUT /resource_providers/{uuid}/traits together with the provider
//     generation; the list also holds Nova's own traits. SetProviderTrait
//     therefore always reads the current set and generation, applies a
//     one-trait delta, and on 409 (placement.concurrent_update) re-reads and
//     re-applies, with jittered backoff and bounded attempts. It never calls
//     DELETE /resource_providers/{uuid}/traits (which removes every trait
//     without a generation check).
//   - A custom trait must exist before a provider can carry it: EnsureTrait
//     (GET, then PUT /traits/{name}) and SetProviderTrait creates it when
//     Placement answers that it is unknown.
//   - 502/503/504 and timeouts are retried per request (ReadRetry,
//     WriteRetry); gophercloud itself retries neither 409 nor 5xx.
//
// The Client needs a ServiceClient whose Microversion was negotiated by
// satellite/openstack.Connect (at least 1.6; "required=" needs 1.18).
package placement
