package authn_test

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/storetest"
)

// openStore opens a store on url (migrated), as a hub replica does at start-up.
func openStore(t testing.TB, url string) *store.Store { return storetest.Open(t, url, nil) }

func pgVerifier(r *auth.Roster, st *store.Store) *auth.Verifier {
	return &auth.Verifier{Roster: func() *auth.Roster { return r }, Audience: audience, Replay: st}
}

// Two hub replicas sharing one PostgreSQL database: a token accepted by one
// is refused by the other, and of many simultaneous presentations of one
// token across both, exactly one succeeds.
func TestReplayAcrossReplicas(t *testing.T) {
	url := storetest.Database(t)
	r := roster(t, satA, operator)
	h1 := startHub(t, pgVerifier(r, openStore(t, url)), false)
	h2 := startHub(t, pgVerifier(r, openStore(t, url)), false)
	f1 := ironlinkv1.NewFleetServiceClient(h1.dial(t, "", ""))
	f2 := ironlinkv1.NewFleetServiceClient(h2.dial(t, "", ""))

	tok := token(t, operator, time.Minute, time.Now())
	if _, err := f1.ListSites(bearer(tok), &ironlinkv1.ListSitesRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := f2.ListSites(bearer(tok), &ironlinkv1.ListSitesRequest{})
	wantCode(t, err, codes.Unauthenticated, "token replayed jti")
	if h2.rec.count() != 0 {
		t.Fatal("the replayed call reached replica 2's handler")
	}

	// A satellite's stream token replayed to the other replica.
	stok := token(t, satA, time.Minute, time.Now())
	s1, err := ironlinkv1.NewLinkServiceClient(h1.dial(t, "", "")).Connect(bearer(stok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Recv(); err != io.EOF {
		t.Fatalf("first link: %v", err)
	}
	s2, err := ironlinkv1.NewLinkServiceClient(h2.dial(t, "", "")).Connect(bearer(stok))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s2.Recv()
	wantCode(t, err, codes.Unauthenticated, "token replayed jti")

	race := token(t, operator, time.Minute, time.Now())
	var ok, replayed atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := f1
			if i%2 == 1 {
				f = f2
			}
			_, err := f.ListSites(bearer(race), &ironlinkv1.ListSitesRequest{})
			switch status.Code(err) {
			case codes.OK:
				ok.Add(1)
			case codes.Unauthenticated:
				replayed.Add(1)
			default:
				t.Errorf("racer: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || replayed.Load() != 11 {
		t.Fatalf("%d accepted, %d refused; want 1 and 11", ok.Load(), replayed.Load())
	}
}

// When the replay cache (PostgreSQL) cannot answer, tokens are refused with
// Unavailable — fail closed, but tell the client to retry.
func TestReplayCacheDownIsUnavailable(t *testing.T) {
	url := storetest.Database(t)
	st := openStore(t, url)
	h := startHub(t, pgVerifier(roster(t, operator), st), false)
	st.Close()
	_, err := ironlinkv1.NewFleetServiceClient(h.dial(t, "", "")).ListSites(bearer(token(t, operator, time.Minute, time.Now())), &ironlinkv1.ListSitesRequest{})
	wantCode(t, err, codes.Unavailable, "retry")
	if h.rec.count() != 0 {
		t.Fatal("call reached the handler")
	}
}

// The jti's lifetime is judged on one clock: a hub replica whose clock is
// two minutes behind the database's still refuses a replayed token for as
// long as it accepts the token at all (before, the hub's exp + leeway was
// compared with the database's now(), so such a replica remembered no jti
// and accepted every replay).
func TestReplayWithHubClockBehindDatabase(t *testing.T) {
	url := storetest.Database(t)
	hubNow := func() time.Time { return time.Now().Add(-2 * time.Minute) }
	v := pgVerifier(roster(t, operator), openStore(t, url))
	v.Now = hubNow
	tok := token(t, operator, time.Minute, hubNow())
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	_, err := v.Verify(t.Context(), tok)
	if !errors.Is(err, &auth.VerifyError{Check: auth.CheckReplay}) {
		t.Fatalf("replay with the hub's clock 2 min behind the database's: err = %v, want %q", err, auth.CheckReplay)
	}
}
