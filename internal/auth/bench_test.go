package auth

import (
	"testing"
	"time"
)

// BenchmarkSign measures minting one client assertion per algorithm — the
// client's cost per RPC (ClientCredentials signs one per call or stream).
// The hub's verification cost is BenchmarkVerify in hub/authn.
func BenchmarkSign(b *testing.B) {
	for _, alg := range Algorithms {
		key := testKey(b, "bench-"+alg, alg)
		b.Run(alg, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Sign(key, "k", "ironlink-agent-site-a", testAudience, time.Minute, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
