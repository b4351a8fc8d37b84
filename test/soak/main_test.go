// Package soak is the long-running soak with an independent invariant
// checker (issue 27 item 4) and the backup-and-restore test (item 5).
//
// TestSoak starts two real ironlink-hub replicas over a private PostgreSQL
// primary and synchronous standby (their multi-host URL) behind a loopback load balancer, real ironlink-satellite
// processes against churning simulated sites (internal/openstacksim) and
// scripted satellites (test/faults/satsim, exact bookkeeping of every
// change sent), an operator quarantining and releasing, and injects faults
// at random: satellite SIGKILL, hub replica SIGKILL and SIGSTOP, link cut,
// PostgreSQL restart, slow Ironic, Placement down, PostgreSQL failover,
// an oversized-request flood, and more (docs/howto/soak.md). A checker that reads PostgreSQL and the simulators (never the
// hub's API) asserts the invariants of docs/howto/soak.md throughout and at
// the end, and prints a summary table.
//
//	SOAK_MINUTES=10 make soak
//	go test -tags soak ./test/soak -run TestSoak -v -timeout 0 -args -soak.minutes=10
//
// TestSoak is built only with the soak tag (make soak), so go test ./...
// (make test) runs TestRestoreDumpTakenMidRun and not the hour-long soak.
package soak

import (
	"testing"

	"github.com/ironlink/ironlink/test/harness"
)

var bins harness.Binaries

func TestMain(m *testing.M) { harness.Main(m, &bins) }
