package authn_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/syncbuf"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

const audience = "https://hub.ironlink.test"

// ---- keys and roster (real keys, generated once) ----

type client struct {
	id, site, kid, alg string
	scopes             []string
}

var (
	satA     = client{"ironlink-agent-site-a", "site-a", "a1", auth.AlgES256, []string{auth.ScopeDeviceUpdate, auth.ScopeDeviceConditionCreate}}
	satA2    = client{"ironlink-agent-site-a", "site-a", "a2", auth.AlgEdDSA, satA.scopes} // second key of site-a
	satB     = client{"ironlink-agent-site-b", "site-b", "b1", auth.AlgRS256, satA.scopes}
	operator = client{"ops-console", "", "o1", auth.AlgES256, []string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}}
	reader   = client{"ops-reader", "", "r1", auth.AlgEdDSA, []string{auth.ScopeOperationsRead}}
	stranger = client{"ops-stranger", "", "s1", auth.AlgES256, []string{auth.ScopeOperationsRead}} // never in the roster
)

var (
	keysMu sync.Mutex
	keys   = map[string]crypto.Signer{}
)

func keyOf(t testing.TB, c client) crypto.Signer {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	name := c.id + "/" + c.kid
	if k, ok := keys[name]; ok {
		return k
	}
	k, err := auth.GenerateKey(c.alg)
	if err != nil {
		t.Fatal(err)
	}
	keys[name] = k
	return k
}

// rosterDoc renders the clients (several keys of one client allowed) as a roster file.
func rosterDoc(t testing.TB, clients ...client) []byte {
	t.Helper()
	var sat, ops strings.Builder
	seen := map[string]bool{}
	// Keep the keys of one client together, in first-seen order.
	first := map[string]int{}
	for i, c := range clients {
		if _, ok := first[c.id]; !ok {
			first[c.id] = i
		}
	}
	clients = slices.Clone(clients)
	slices.SortStableFunc(clients, func(a, b client) int { return first[a.id] - first[b.id] })
	for _, c := range clients {
		e, err := auth.FormatRosterEntry(c.id, c.site, c.scopes, c.kid, keyOf(t, c).Public())
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.id] {
			e = e[strings.Index(e, "      - kid:"):]
		}
		seen[c.id] = true
		if c.site != "" {
			sat.WriteString(e)
		} else {
			ops.WriteString(e)
		}
	}
	return []byte("satellites:\n" + sat.String() + "operators:\n" + ops.String())
}

func roster(t testing.TB, clients ...client) *auth.Roster {
	t.Helper()
	r, err := auth.ParseRoster(rosterDoc(t, clients...))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func memVerifier(r *auth.Roster) *auth.Verifier {
	return &auth.Verifier{Roster: func() *auth.Roster { return r }, Audience: audience, Replay: &auth.MemoryReplayCache{}}
}

func token(t testing.TB, c client, lifetime time.Duration, at time.Time) string {
	t.Helper()
	tok, err := auth.Sign(keyOf(t, c), c.kid, c.id, audience, lifetime, at)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func creds(t testing.TB, c client) *auth.ClientCredentials {
	return &auth.ClientCredentials{Key: keyOf(t, c), KID: c.kid, ClientID: c.id, Audience: audience}
}

// ---- a real hub-shaped gRPC server ----

type recorder struct {
	mu    sync.Mutex
	calls []string
	ids   []auth.Identity
}

func (r *recorder) record(ctx context.Context, method string) {
	id, ok := authn.FromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, method)
	if ok {
		r.ids = append(r.ids, id)
	} else {
		r.ids = append(r.ids, auth.Identity{ClientID: "<none>"})
	}
}

func (r *recorder) last() (string, auth.Identity, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return "", auth.Identity{}, 0
	}
	return r.calls[len(r.calls)-1], r.ids[len(r.ids)-1], len(r.calls)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

type fleetServer struct {
	ironlinkv1.UnimplementedFleetServiceServer
	rec *recorder
}

func (f *fleetServer) ListSites(ctx context.Context, _ *ironlinkv1.ListSitesRequest) (*ironlinkv1.ListSitesResponse, error) {
	f.rec.record(ctx, "ListSites")
	return &ironlinkv1.ListSitesResponse{}, nil
}

func (f *fleetServer) QuarantineDevice(ctx context.Context, _ *ironlinkv1.QuarantineDeviceRequest) (*ironlinkv1.QuarantineDeviceResponse, error) {
	f.rec.record(ctx, "QuarantineDevice")
	return &ironlinkv1.QuarantineDeviceResponse{}, nil
}

type linkServer struct {
	ironlinkv1.UnimplementedLinkServiceServer
	rec *recorder
}

func (l *linkServer) Connect(stream ironlinkv1.LinkService_ConnectServer) error {
	l.rec.record(stream.Context(), "Connect")
	return nil
}

// extraDesc is a service the authorization table does not know.
var extraDesc = grpc.ServiceDesc{
	ServiceName: "ironlink.v1.Hidden",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Do", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			srv.(*recorder).record(ctx, "Hidden")
			return &emptypb.Empty{}, nil
		}
		if ic == nil {
			return h(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/ironlink.v1.Hidden/Do"}, h)
	}}},
}

type hub struct {
	addr   string
	caFile string
	pki    string
	rec    *recorder
}

// startHub serves the ironlink services, health and reflection on
// 127.0.0.1 with TLS from a fresh test PKI (mutual TLS when mtls is set).
func startHub(t testing.TB, v *auth.Verifier, mtls bool) *hub {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key, err := tlsutil.GenerateTestPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	clientCA := ""
	if mtls {
		clientCA = ca
	}
	cfg, err := tlsutil.ServerConfig(cert, key, clientCA)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, v, credentials.NewTLS(cfg), &hub{caFile: ca, pki: dir})
}

func serve(t testing.TB, v *auth.Verifier, tc credentials.TransportCredentials, h *hub) *hub {
	t.Helper()
	h.rec = &recorder{}
	log := testlog.New(t)
	srv := grpc.NewServer(grpc.Creds(tc),
		grpc.ChainUnaryInterceptor(authn.UnaryInterceptor(v, log)),
		grpc.ChainStreamInterceptor(authn.StreamInterceptor(v, log)))
	ironlinkv1.RegisterFleetServiceServer(srv, &fleetServer{rec: h.rec})
	ironlinkv1.RegisterLinkServiceServer(srv, &linkServer{rec: h.rec})
	srv.RegisterService(&extraDesc, h.rec)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	h.addr = lis.Addr().String()
	return h
}

// dial connects with TLS trusting the hub's CA; extra options add credentials.
func (h *hub) dial(t testing.TB, certFile, keyFile string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cfg, err := tlsutil.ClientConfig(h.caFile, certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(h.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func bearer(tok string) context.Context {
	ctx := context.Background()
	if tok != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	return ctx
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), code, msg)
	}
}

// ---- tests ----

func TestPublicServicesNeedNoToken(t *testing.T) {
	h := startHub(t, memVerifier(roster(t, satA, operator)), false)
	cc := h.dial(t, "", "")
	resp, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if !strings.Contains(rr.String(), "ironlink.v1.FleetService") {
		t.Fatalf("reflection lists %v", rr)
	}
	// The same connection without a token cannot call the API.
	_, err = ironlinkv1.NewFleetServiceClient(cc).ListSites(context.Background(), &ironlinkv1.ListSitesRequest{})
	wantCode(t, err, codes.Unauthenticated, "missing token")
	if h.rec.count() != 0 {
		t.Fatal("a refused call reached the handler")
	}
}

func TestInterceptorCodes(t *testing.T) {
	r := roster(t, satA, satB, operator, reader)
	h := startHub(t, memVerifier(r), false)
	cc := h.dial(t, "", "")
	fleet := ironlinkv1.NewFleetServiceClient(cc)
	now := time.Now()
	aPub, _ := auth.PublicKeyPEM(keyOf(t, satA))
	claims := func(c client) map[string]any {
		return map[string]any{"iss": c.id, "sub": c.id, "aud": audience, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": rand.Text()}
	}
	wrongAud := claims(operator)
	wrongAud["aud"] = "https://elsewhere.example"

	refused := []struct {
		name  string
		md    string // full authorization header value; "" = none
		code  codes.Code
		check string
	}{
		{"no token", "", codes.Unauthenticated, "missing token"},
		{"not bearer", "Basic b3BzOnB3", codes.Unauthenticated, "token malformed"},
		{"garbage", "Bearer not-a-jwt", codes.Unauthenticated, "token malformed"},
		{"expired", "Bearer " + token(t, operator, time.Minute, now.Add(-10*time.Minute)), codes.Unauthenticated, "token expired"},
		{"not yet valid", "Bearer " + token(t, operator, time.Minute, now.Add(10*time.Minute)), codes.Unauthenticated, "token not yet valid"},
		{"wrong audience", "Bearer " + signRaw(t, keyOf(t, operator), jose.ES256, operator.kid, wrongAud), codes.Unauthenticated, "token wrong audience"},
		{"unknown client", "Bearer " + token(t, stranger, time.Minute, now), codes.Unauthenticated, auth.RefusedMessage},
		{"unknown kid", "Bearer " + token(t, client{operator.id, "", "o9", auth.AlgES256, nil}, time.Minute, now), codes.Unauthenticated, auth.RefusedMessage},
		{"another client's key", "Bearer " + signRaw(t, keyOf(t, satA), jose.ES256, operator.kid, claims(operator)), codes.Unauthenticated, auth.RefusedMessage},
		{"alg none", "Bearer " + unsigned(map[string]any{"alg": "none", "kid": operator.kid}, claims(operator)), codes.Unauthenticated, auth.RefusedMessage},
		{"HS256 keyed with the public key", "Bearer " + signRaw(t, []byte(aPub), jose.HS256, satA.kid, claims(satA)), codes.Unauthenticated, auth.RefusedMessage},
		{"lifetime too long", "Bearer " + token(t, operator, time.Hour, now), codes.Unauthenticated, "token lifetime too long"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.md != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.md)
			}
			_, err := fleet.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{})
			wantCode(t, err, tc.code, tc.check)
			if strings.Contains(status.Convert(err).Message(), "BEGIN") {
				t.Fatal("message leaks key material")
			}
		})
	}
	if h.rec.count() != 0 {
		t.Fatalf("%d refused calls reached the handlers", h.rec.count())
	}

	t.Run("replayed jti", func(t *testing.T) {
		tok := token(t, operator, time.Minute, now)
		if _, err := fleet.ListSites(bearer(tok), &ironlinkv1.ListSitesRequest{}); err != nil {
			t.Fatal(err)
		}
		n := h.rec.count()
		_, err := fleet.ListSites(bearer(tok), &ironlinkv1.ListSitesRequest{})
		wantCode(t, err, codes.Unauthenticated, "token replayed jti")
		if h.rec.count() != n {
			t.Fatal("replayed call reached the handler")
		}
	})

	t.Run("operations:read calling QuarantineDevice", func(t *testing.T) {
		n := h.rec.count()
		_, err := fleet.QuarantineDevice(bearer(token(t, reader, time.Minute, now)), &ironlinkv1.QuarantineDeviceRequest{})
		wantCode(t, err, codes.PermissionDenied, "lacks scope operations:write")
		if r := grpcerr.Reason(err); r != grpcerr.ReasonMissingScope {
			t.Fatalf("reason %q, want %s (as the link's scope check says)", r, grpcerr.ReasonMissingScope)
		}
		if h.rec.count() != n {
			t.Fatal("denied call reached the handler")
		}
		if _, err := fleet.ListSites(bearer(token(t, reader, time.Minute, now)), &ironlinkv1.ListSitesRequest{}); err != nil {
			t.Fatal(err)
		}
		if m, id, _ := h.rec.last(); m != "ListSites" || id.ClientID != reader.id || id.Site != "" || id.KeyID != reader.kid {
			t.Fatalf("handler saw %s %+v", m, id)
		}
	})

	t.Run("operator quarantines", func(t *testing.T) {
		oc := h.dial(t, "", "", grpc.WithPerRPCCredentials(creds(t, operator)))
		if _, err := ironlinkv1.NewFleetServiceClient(oc).QuarantineDevice(context.Background(), &ironlinkv1.QuarantineDeviceRequest{}); err != nil {
			t.Fatal(err)
		}
		if m, id, _ := h.rec.last(); m != "QuarantineDevice" || id.ClientID != operator.id || !id.HasScope(auth.ScopeOperationsWrite) {
			t.Fatalf("handler saw %s %+v", m, id)
		}
	})

	t.Run("satellite reading the fleet", func(t *testing.T) {
		_, err := fleet.ListSites(bearer(token(t, satA, time.Minute, now)), &ironlinkv1.ListSitesRequest{})
		wantCode(t, err, codes.PermissionDenied, "lacks scope operations:read")
	})

	t.Run("satellite link streams, a fresh assertion per stream", func(t *testing.T) {
		sc := h.dial(t, "", "", grpc.WithPerRPCCredentials(creds(t, satB)))
		link := ironlinkv1.NewLinkServiceClient(sc)
		for i := range 3 { // three reconnects: each presents a new jti
			stream, err := link.Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != io.EOF {
				t.Fatalf("stream %d: %v", i, err)
			}
			if m, id, _ := h.rec.last(); m != "Connect" || id.ClientID != satB.id || id.Site != "site-b" || id.KeyID != satB.kid {
				t.Fatalf("handler saw %s %+v", m, id)
			}
		}
	})

	t.Run("operator opening a link", func(t *testing.T) {
		n := h.rec.count()
		stream, err := ironlinkv1.NewLinkServiceClient(cc).Connect(bearer(token(t, operator, time.Minute, now)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		wantCode(t, err, codes.PermissionDenied, "lacks scope device-condition:create")
		if h.rec.count() != n {
			t.Fatal("denied stream reached the handler")
		}
	})

	t.Run("link without a token", func(t *testing.T) {
		stream, err := ironlinkv1.NewLinkServiceClient(cc).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		wantCode(t, err, codes.Unauthenticated, "missing token")
	})

	t.Run("method missing from the authorization table", func(t *testing.T) {
		err := cc.Invoke(bearer(token(t, operator, time.Minute, now)), "/ironlink.v1.Hidden/Do", &emptypb.Empty{}, &emptypb.Empty{})
		wantCode(t, err, codes.PermissionDenied, "not in the hub's authorization table")
	})
}

func TestClientCredentialsRequireTLS(t *testing.T) {
	r := roster(t, operator)
	h := serve(t, memVerifier(r), insecure.NewCredentials(), &hub{})
	// gRPC refuses to send the token over plaintext at all.
	_, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(creds(t, operator)))
	if err == nil || !strings.Contains(err.Error(), "transport level security") {
		t.Fatalf("token would be sent in clear: %v", err)
	}
	dev := creds(t, operator)
	dev.Insecure = true // explicit local-development opt-in
	cc2, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(dev))
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	if _, err := ironlinkv1.NewFleetServiceClient(cc2).ListSites(context.Background(), &ironlinkv1.ListSitesRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestMutualTLSBinding(t *testing.T) {
	h := startHub(t, memVerifier(roster(t, satA, operator)), true)
	satCert, satKey, err := tlsutil.IssueClientCert(h.pki, satA.id)
	if err != nil {
		t.Fatal(err)
	}
	opsCert, opsKey, err := tlsutil.IssueClientCert(h.pki, operator.id)
	if err != nil {
		t.Fatal(err)
	}

	// The satellite's certificate with the operator's token: refused.
	cc := h.dial(t, satCert, satKey, grpc.WithPerRPCCredentials(creds(t, operator)))
	_, err = ironlinkv1.NewFleetServiceClient(cc).ListSites(context.Background(), &ironlinkv1.ListSitesRequest{})
	wantCode(t, err, codes.Unauthenticated, "client certificate does not match client id ops-console")

	// Matching certificate and token: accepted.
	cc = h.dial(t, opsCert, opsKey, grpc.WithPerRPCCredentials(creds(t, operator)))
	if _, err := ironlinkv1.NewFleetServiceClient(cc).ListSites(context.Background(), &ironlinkv1.ListSitesRequest{}); err != nil {
		t.Fatal(err)
	}
	sc := h.dial(t, satCert, satKey, grpc.WithPerRPCCredentials(creds(t, satA)))
	stream, err := ironlinkv1.NewLinkServiceClient(sc).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("satellite with matching certificate: %v", err)
	}

	// No client certificate at all: the handshake fails.
	cc = h.dial(t, "", "", grpc.WithPerRPCCredentials(creds(t, operator)))
	_, err = ironlinkv1.NewFleetServiceClient(cc).ListSites(context.Background(), &ironlinkv1.ListSitesRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("no client certificate: %v", err)
	}
	if n := h.rec.count(); n != 2 {
		t.Fatalf("%d calls reached the handlers, want 2", n)
	}
}

// A key rotated out of the roster file (reloaded by the watcher) stops
// working while the other key of the same client keeps working.
func TestKeyRotatedOutOfRosterFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "roster.yaml")
	if err := os.WriteFile(path, rosterDoc(t, satA, satA2, operator), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := make(chan []string, 4)
	w, err := auth.NewRosterWatcher(path, testlog.New(t), func(o, n *auth.Roster) { changed <- auth.Removed(o, n) }, auth.WithCheckInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	v := &auth.Verifier{Roster: w.Roster, Audience: audience, Replay: &auth.MemoryReplayCache{}}
	h := startHub(t, v, false)
	oldKey := ironlinkv1.NewLinkServiceClient(h.dial(t, "", "", grpc.WithPerRPCCredentials(creds(t, satA))))
	newKey := ironlinkv1.NewLinkServiceClient(h.dial(t, "", "", grpc.WithPerRPCCredentials(creds(t, satA2))))
	connect := func(c ironlinkv1.LinkServiceClient) error {
		stream, err := c.Connect(context.Background())
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		if err == io.EOF {
			return nil
		}
		return err
	}
	for _, c := range []ironlinkv1.LinkServiceClient{oldKey, newKey} {
		if err := connect(c); err != nil {
			t.Fatalf("during the rotation: %v", err)
		}
	}
	linkID := auth.Identity{ClientID: satA.id, Site: satA.site, KeyID: satA.kid}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, rosterDoc(t, satA2, operator), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case removed := <-changed:
		if len(removed) != 1 || removed[0] != satA.id+"/"+satA.kid {
			t.Fatalf("Removed = %v", removed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("roster not reloaded")
	}
	if w.Roster().StillAuthorized(linkID, auth.ScopeDeviceConditionCreate) {
		t.Fatal("a link authenticated with the removed key is still authorized")
	}
	wantCode(t, connect(oldKey), codes.Unauthenticated, auth.RefusedMessage)
	if err := connect(newKey); err != nil {
		t.Fatalf("new key after the rotation: %v", err)
	}
}

// ---- raw token helpers for attacks Sign would never produce ----

func signRaw(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func unsigned(header, claims map[string]any) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

// ctxReplay is a replay cache that answers like the PostgreSQL one when the
// caller's context ends first: with the context's error.
type ctxReplay struct{}

func (ctxReplay) Remember(ctx context.Context, _, _ string, _ time.Duration) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

// TestClientGoneDuringVerifyIsNotAnError: a client that cancels its call
// while the hub checks its token (the jti replay lookup) is answered
// Canceled and logged below ERROR: nothing is wrong with the hub, and
// "cannot verify token" at ERROR (Unavailable) sends operators looking for a
// database fault.
func TestClientGoneDuringVerifyIsNotAnError(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	v := &auth.Verifier{Roster: func() *auth.Roster { return roster(t, operator) }, Audience: audience, Replay: ctxReplay{}}
	ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(),
		metadata.Pairs("authorization", "Bearer "+token(t, operator, time.Minute, time.Now()))))
	cancel()
	_, err := authn.UnaryInterceptor(v, log)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/ironlink.v1.FleetService/ListSites"},
		func(context.Context, any) (any, error) { return nil, nil })
	if status.Code(err) != codes.Canceled {
		t.Errorf("code %v, want Canceled", status.Code(err))
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("logged at ERROR: %s", logs.String())
	}
}

// A caller without a roster key cannot learn from the refusal whether a
// client id or a kid exists: an unknown client, a known client with an
// unknown kid and a known kid with someone else's signature all read the
// same; the hub's log names the check and the client id.
func TestRefusalDoesNotRevealRosterEntries(t *testing.T) {
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ic := authn.UnaryInterceptor(memVerifier(roster(t, satA, operator)), log)
	call := func(tok string) string {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
		_, err := ic(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/ironlink.v1.FleetService/ListSites"},
			func(context.Context, any) (any, error) { return nil, nil })
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("err = %v, want Unauthenticated", err)
		}
		return status.Convert(err).Message()
	}
	now := time.Now()
	claims := map[string]any{"iss": operator.id, "sub": operator.id, "aud": audience, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": rand.Text()}
	msgs := map[string]string{
		"unknown client": call(token(t, stranger, time.Minute, now)),
		"unknown kid":    call(token(t, client{operator.id, "", "o9", auth.AlgES256, nil}, time.Minute, now)),
		"bad signature":  call(signRaw(t, keyOf(t, satA), jose.ES256, operator.kid, claims)),
		"algorithm":      call(signRaw(t, keyOf(t, satB), jose.RS256, operator.kid, claims)),
	}
	for check, m := range msgs {
		if m != auth.RefusedMessage {
			t.Errorf("%s: caller told %q, want the one generic %q", check, m, auth.RefusedMessage)
		}
	}
	logged := buf.String()
	for _, want := range []string{`check="unknown client"`, stranger.id, `check="unknown kid"`, `check="bad signature"`, `check="algorithm not allowed"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("hub log lacks %q:\n%s", want, logged)
		}
	}
}
