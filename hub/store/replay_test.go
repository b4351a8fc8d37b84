package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

var _ auth.ReplayCache = (*store.Store)(nil)

func openReplayStore(t *testing.T, url string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url, testlog.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestRememberJTI(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	s1, s2 := openReplayStore(t, url), openReplayStore(t, url) // two replicas
	exp := time.Minute

	if replayed, err := s1.Remember(ctx, "ironlink-agent-a", "j1", exp); err != nil || replayed {
		t.Fatalf("first use: replayed=%v err=%v", replayed, err)
	}
	if replayed, err := s2.Remember(ctx, "ironlink-agent-a", "j1", exp); err != nil || !replayed {
		t.Fatalf("replay on the other replica: replayed=%v err=%v", replayed, err)
	}
	if replayed, err := s2.Remember(ctx, "ops-console", "j1", exp); err != nil || replayed {
		t.Fatalf("same jti, other client: replayed=%v err=%v", replayed, err)
	}

	// An expired row no longer counts, and is purged.
	if _, err := s1.Remember(ctx, "ironlink-agent-a", "old", -time.Second); err != nil {
		t.Fatal(err)
	}
	if replayed, err := s1.Remember(ctx, "ironlink-agent-a", "old", exp); err != nil || replayed {
		t.Fatalf("expired entry counted as replay: %v %v", replayed, err)
	}
	if _, err := s1.Remember(ctx, "ironlink-agent-a", "gone", -time.Second); err != nil {
		t.Fatal(err)
	}
	n, err := s2.PurgeExpiredJTIs(ctx)
	if err != nil || n != 1 {
		t.Fatalf("purged %d, err %v; want 1", n, err)
	}
	var left int
	if err := s1.Pool().QueryRow(ctx, `SELECT count(*) FROM jti_replay`).Scan(&left); err != nil || left != 3 {
		t.Fatalf("rows left %d err %v, want 3", left, err)
	}

	// Many replicas racing on one jti: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := s1
			if i%2 == 1 {
				s = s2
			}
			replayed, err := s.Remember(ctx, "ironlink-agent-a", "race", exp)
			if err != nil {
				t.Error(err)
			}
			if !replayed {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d racers accepted the same jti, want 1", wins.Load())
	}
}
