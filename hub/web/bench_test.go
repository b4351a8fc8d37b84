package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkPages10000 renders the fleet view's pages over 10,000 devices in
// four sites (rows inserted with SQL, statuses and facts as the ingest
// stores them), through the whole handler: authentication, the fleet API
// calls, the queries and the templates.
//
//	go test ./hub/web -run '^$' -bench Pages10000
func BenchmarkPages10000(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	if _, err := e.st.Pool().Exec(ctx, `
		INSERT INTO sites (name, last_seen_at) SELECT 'site-'||i, now() FROM generate_series(0,3) i;
		INSERT INTO devices (id, site, name, facts, status, status_reason, observed_at)
		SELECT gen_random_uuid(), 'site-'||(i%4), 'node-'||(i%4)||'-'||lpad((i/4)::text, 4, '0'),
			jsonb_build_object('name', 'node', 'provision_state', 'active', 'power_state', 'power on', 'resource_class', 'gpu'),
			(ARRAY['AVAILABLE','IN_SERVICE','FAULTED','HELD','MAINTENANCE'])[1 + (i%5)], 'seeded', now()
		FROM generate_series(0, 9999) i;
		ANALYZE`); err != nil {
		b.Fatal(err)
	}
	var id string
	if err := e.st.Pool().QueryRow(ctx, `SELECT id::text FROM devices WHERE site = 'site-1' LIMIT 1`).Scan(&id); err != nil {
		b.Fatal(err)
	}
	h := e.server(b, proxyCfg).Handler()
	for _, p := range []struct{ name, path string }{
		{"overview", "/"},
		{"list", "/devices"},
		{"list-faulted", "/devices?status=FAULTED"},
		{"list-1000", "/devices?site=site-2&size=1000"},
		{"search", "/devices?q=node-3-12"},
		{"list-by-id", "/devices?sort=id"},
		{"list-since-desc", "/devices?sort=-since"},
		{"selector", "/devices?selector=site%3Dsite-2%2Cstatus%3Dfaulted"},
		{"site", "/sites/site-1"},
		{"holds", "/holds"},
		{"device", "/devices/" + id},
		{"device-by-name", "/devices/site-1/node-1-0042"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				r := httptest.NewRequest("GET", p.path, nil)
				r.RemoteAddr = "127.0.0.1:1"
				r.Header.Set(DefaultUserHeader, "ops-read")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, w.Code, w.Body.String())
				}
			}
		})
	}
}
