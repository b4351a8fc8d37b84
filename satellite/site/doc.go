// Package site is the satellite's seam to its OpenStack site: one
// interface per service — Ironic, Placement, Nova, and Images (Glance's
// image lookup) — through which the agent, the gate and the operations
// runner read and write, with what each method may be relied on for —
// above all whether it is read-only and whether it may be called again
// with the same arguments (metal3's Provisioner habit); Result, the one
// outcome of a step (done; retry after D, transient; failed, permanent,
// with a reason); and an in-memory Fixture that implements every
// interface — with Ironic's provision state machine, power, maintenance,
// locks, and Nova's server create and delete on a node — records every
// call and fails on command, so agent logic (poll diffing, the sweep's
// orphan verdict, resync decisions) and operations (every kind, cancel,
// failures) are tested without HTTP, in milliseconds.
//
// The production implementations are the gophercloud-backed clients of
// satellite/ironic, satellite/placement, satellite/nova and
// satellite/glance (asserted at compile time here): every request the
// satellite makes to OpenStack is in one of those four packages (and
// satellite/openstack for Keystone and the version documents). This
// package owns no I/O of its own and must not
// import satellite/agent, satellite/gate or anything of the hub.
package site
