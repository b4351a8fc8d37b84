// Package operations runs the hub's operations at the site (SPEC
// "Operations"; proto ironlink.v1.OperationRequest / OperationProgress):
// enrol, inspect, clean, provide, Ironic-direct deploy and undeploy,
// adoption (adopt.go), Nova server create and delete, and the node actions
// (power on and off, reboot, maintenance set and clear in nodeactions.go;
// reprovision in reprovision.go).
//
// Each operation is a level-triggered reconcile against Ironic's provision
// state machine (docs/design/openstack.md §1.2), in the style of metal3's
// baremetal-operator: every pass reads the node, and decides from what it
// sees the one next idempotent step towards the goal ("make the node reach
// state S"), so a restarted satellite, a hub failover or a redelivered
// request continues where Ironic is and never repeats a side effect:
//
//   - ENROL creates the node by name (an existing node of that name is taken
//     over, never duplicated), its ports by MAC (existing ones kept), its
//     traits, then manages it (enroll → verifying → manageable).
//   - INSPECT and CLEAN start and end in manageable, so the state alone
//     cannot say whether they ran. Before asking Ironic, the runner writes a
//     marker into the node's extra ("ironlink_operation": operation id,
//     action and the node's provision_updated_at at that moment); a later
//     pass that finds its own marker and a newer provision_updated_at knows
//     the action was taken and does not ask again. PROVIDE, ENROL (whose
//     marker also says it created the node) and the "manage" below write it
//     too; it is removed when the operation ends, and in the same request
//     the operation's result is left at "ironlink_last_operation"
//     (operation id, SUCCEEDED, FAILED or CANCELLED, failure reason, error,
//     end time): a redelivery of that operation to a restarted satellite
//     (its final progress never reached the hub) reports that result and
//     asks nothing of Ironic, instead of starting again from the state it
//     left the node in (a REPROVISION that ended available would otherwise
//     manage and provide again).
//   - INSPECT, CLEAN and PROVIDE that find the node in clean failed or
//     inspect failed left by an earlier action first ask for "manage"
//     (Ironic's state machine goes from both to manageable); a failure of
//     their own action ends them FAILED.
//   - PROVIDE, DEPLOY and UNDEPLOY move between different stable states
//     (manageable → available, available → active, active → available).
//   - NOVA_CREATE looks for the node's instance and for a server of the
//     requested name before it boots one, and NOVA_DELETE deletes the
//     server and waits for the node to come back to available.
//
// Every call goes through the satellite/site seams (site.Ironic,
// site.Nova, site.Images): the operations credential's clients in
// production (New), a site.Fixture in tests (NewOnSite). A pass returns a
// site.Result: done, retry after the poll interval (Ironic or Nova is
// moving the node) or at once (a write was made), or failed with a reason.
// 409 NodeLocked and 502/503/504 are retried with backoff
// (satellite/openstack.Retry); an Ironic failure state (clean failed,
// inspect failed, deploy failed, error) ends the operation FAILED with
// Ironic's last_error. Nothing half-made stays: a NOVA_CREATE whose server
// goes to ERROR deletes it (its error names Nova's fault and the node's
// last_error), an ENROL whose port MAC another node owns deletes the node
// it created (its error names the owner). Every write is recorded on its
// step with the delivery attempt and OpenStack's answer (record.go). A cancel aborts from the "* wait" states and is
// refused elsewhere. One node never runs two operations at once. BMC
// credentials (driver_info) are passed to Ironic only and never logged.
package operations
