package policyrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/testlog"
)

// BenchmarkDecisionPass measures one evaluator pass that decides one fresh
// trigger (a quarantine with its command) on a site of 1000 devices with 50
// already decided FAULTED devices, against the raw limit measured in the
// same run: the store's SetDesiredImpairment alone (the operator's
// quarantine). It reports the pass's ms and the ratio.
func BenchmarkDecisionPass(b *testing.B) {
	ctx := context.Background()
	st, _ := newStore(b)
	s := newSite(b, st, "site-a", 1000)
	doc := "policy:\n  default:\n    enabled: true\n    guard: {maxDevices: 1000000, maxPercent: 100, window: 1s}\n    rules: [{name: f, to: [FAULTED]}]\n"
	ev := policyrun.New(st, policyrun.Config{Policy: benchPolicy(b, doc), Replica: "r1"}, testlog.Discard())
	for i := 0; i < 50; i++ {
		s.Fault(s.IDs[i:i+1], "DeployFailed", time.Now())
	}
	if _, err := ev.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	// Raw: the operator's quarantine path, release and quarantine alternately.
	const rawN = 200
	start := time.Now()
	for i := 0; i < rawN; i++ {
		imp := store.ImpairmentQuarantined
		if i%2 == 1 {
			imp = store.ImpairmentReleased
		}
		if _, err := st.SetDesiredImpairment(ctx, s.IDs[999], imp, "bench", "raw", "operator-api"); err != nil {
			b.Fatal(err)
		}
	}
	raw := time.Since(start) / rawN
	next := 50
	b.ResetTimer()
	var pass time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if next >= 990 {
			b.Skip("out of devices")
		}
		s.Fault(s.IDs[next:next+1], "DeployFailed", time.Now())
		next++
		b.StartTimer()
		t0 := time.Now()
		stats, err := ev.Tick(ctx)
		pass += time.Since(t0)
		if err != nil || stats.Quarantined != 1 {
			b.Fatalf("pass: %+v %v", stats, err)
		}
	}
	per := pass / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "pass-ms")
	b.ReportMetric(float64(raw.Microseconds())/1000, "raw-setdesired-ms")
	b.ReportMetric(float64(per)/float64(raw), "ratio")
}
