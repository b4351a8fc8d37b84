// Package faults is the link's fault-injection suite (issue 4 item 5): each
// test starts real ironlink-hub processes over a real PostgreSQL, real
// ironlink-satellite processes against the in-process OpenStack simulator
// and/or scripted satellites (satsim) with exact bookkeeping, with a TCP
// load balancer (internal/tcpproxy) in between, injects one fault, and
// checks what an operator would see: FleetService answers, and the hub's
// tables read directly — every condition change committed exactly once in
// effect, final conditions equal the simulator's truth, every command in
// the right final state, the trait in the simulator equal to the desired
// state.
//
// Each scenario runs -faults.repeat times (default 1), each time with fresh
// processes and a fresh database:
//
//	go test ./test/faults -count=1 -v -args -faults.repeat=10
package faults

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/ironlink/ironlink/test/harness"
)

var repeatN = flag.Int("faults.repeat", 1, "run each fault scenario this many times, each with fresh processes and databases")

var bins harness.Binaries

func TestMain(m *testing.M) { harness.Main(m, &bins) }

// repeat runs scenario -faults.repeat times as subtests run-1, run-2, ...
// and logs how many passed.
func repeat(t *testing.T, scenario func(t *testing.T)) {
	n := max(*repeatN, 1)
	passed := 0
	for i := 1; i <= n; i++ {
		start := time.Now()
		ok := t.Run(fmt.Sprintf("run-%d", i), scenario)
		if ok {
			passed++
		}
		t.Logf("run %d/%d: passed=%v in %s", i, n, ok, time.Since(start).Round(100*time.Millisecond))
	}
	t.Logf("%s: %d of %d runs passed", t.Name(), passed, n)
}
