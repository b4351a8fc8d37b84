package authn_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// benchPool is how many distinct tokens each algorithm's benchmark cycles
// through; the replay cache is emptied (timer stopped) before a token is
// presented again, so every timed Verify is a first presentation.
const benchPool = 2048

var (
	benchTokensMu sync.Mutex
	benchTokens   = map[string][]string{}
)

func benchTokenPool(b *testing.B, c client) []string {
	benchTokensMu.Lock()
	defer benchTokensMu.Unlock()
	if p, ok := benchTokens[c.alg]; ok {
		return p
	}
	p := make([]string, benchPool)
	now := time.Now()
	for i := range p {
		p[i] = token(b, c, 5*time.Minute, now)
	}
	benchTokens[c.alg] = p
	return p
}

// BenchmarkVerify measures the cost of verifying one client assertion
// (parse, roster lookup, signature, claims, replay check) per algorithm,
// with the in-memory replay cache and with the PostgreSQL one shared by all
// replicas (one INSERT … ON CONFLICT round trip per token).
//
//	go test ./hub/authn -run '^$' -bench BenchmarkVerify -benchtime 3s
func BenchmarkVerify(b *testing.B) {
	clients := []client{satA, satB, satA2} // ES256, RS256, EdDSA
	r := roster(b, clients...)
	url := pgtest.MigratedDatabase(b)
	st := openStore(b, url)
	ctx := context.Background()
	for _, c := range clients {
		pool := benchTokenPool(b, c)
		for _, cache := range []string{"memory", "postgres"} {
			b.Run(c.alg+"/"+cache, func(b *testing.B) {
				v := &auth.Verifier{Roster: func() *auth.Roster { return r }, Audience: audience}
				reset := func() {
					if cache == "memory" {
						v.Replay = &auth.MemoryReplayCache{}
						return
					}
					v.Replay = st
					if _, err := st.Pool().Exec(ctx, `TRUNCATE jti_replay`); err != nil {
						b.Fatal(err)
					}
				}
				reset()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if i > 0 && i%benchPool == 0 {
						b.StopTimer()
						reset()
						b.StartTimer()
					}
					if _, err := v.Verify(ctx, pool[i%benchPool]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
