// Package site is the satellite's seam to its OpenStack site: the small
// interfaces through which the agent and the gate read and write Ironic,
// Placement and Nova (Ironic, Placement, Nova), with what each method may
// be relied on for — above all whether it is read-only and whether it may
// be called again with the same arguments (metal3's Provisioner habit) —
// and an in-memory Fixture that implements all three, records every call
// and fails on command, so agent logic (poll diffing, the sweep's orphan
// verdict, resync decisions) is tested without HTTP.
//
// The production implementations are the gophercloud-backed clients of
// satellite/ironic, satellite/placement and satellite/nova (asserted at
// compile time here). This package owns no I/O of its own and must not
// import satellite/agent, satellite/gate or anything of the hub.
package site
