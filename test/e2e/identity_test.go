package e2e

import (
	"crypto"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// identity is the PKI and roster one test's hub runs with: a throwaway CA
// and server certificate, and a key per client.
type identity struct {
	dir, ca, cert, key, roster string
	keys                       map[string]crypto.Signer // client id → private key
	keyFiles                   map[string]string        // client id → PEM path
	entries                    map[string]string        // client id → roster entry
	sites                      map[string]string        // client id → site (satellites)
	checkers                   map[string]string        // client id → roster entry (healthCheckers)
}

// newIdentity creates the PKI and one key per client; satellites maps site
// names to make ironlink-agent-<site> clients, operators maps operator ids
// to their scopes.
func newIdentity(t *testing.T, sites []string, operators map[string][]string) *identity {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key, err := tlsutil.GenerateTestPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := &identity{dir: dir, ca: ca, cert: cert, key: key, roster: filepath.Join(dir, "roster.yaml"),
		keys: map[string]crypto.Signer{}, keyFiles: map[string]string{}, entries: map[string]string{}, sites: map[string]string{},
		checkers: map[string]string{}}
	for _, s := range sites {
		id.add(t, auth.SatelliteClientID(s), s, auth.SiteScopes)
	}
	for op, scopes := range operators {
		id.add(t, op, "", scopes)
	}
	id.writeRoster(t, nil)
	return id
}

// addChecker adds a health checker bound to site (roster section
// healthCheckers, scope device-health:create) and rewrites the roster
// (the hub reloads it when the file changes).
func (id *identity) addChecker(t *testing.T, clientID, site string) {
	t.Helper()
	id.add(t, clientID, site, []string{auth.ScopeDeviceHealthCreate})
	id.checkers[clientID] = id.entries[clientID]
	delete(id.entries, clientID)
	delete(id.sites, clientID)
	id.writeRoster(t, nil)
}

// add creates clientID's key and roster entry (site "" for an operator).
func (id *identity) add(t *testing.T, clientID, site string, scopes []string) {
	t.Helper()
	k, err := auth.GenerateKey(auth.AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(id.dir, clientID+".pem")
	if err := auth.WritePrivateKeyPEM(path, k); err != nil {
		t.Fatal(err)
	}
	kid, err := auth.Thumbprint(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	entry, err := auth.FormatRosterEntry(clientID, site, scopes, kid, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	id.keys[clientID], id.keyFiles[clientID], id.entries[clientID] = k, path, entry
	if site != "" {
		id.sites[clientID] = site
	}
}

// writeRoster writes the roster with every client except those in without.
func (id *identity) writeRoster(t *testing.T, without []string) {
	t.Helper()
	var sats, ops []string
	for client, entry := range id.entries {
		if slices.Contains(without, client) {
			continue
		}
		if _, ok := id.sites[client]; ok {
			sats = append(sats, entry)
		} else {
			ops = append(ops, entry)
		}
	}
	body := "satellites:\n" + strings.Join(sats, "") + "operators:\n" + strings.Join(ops, "")
	if len(id.checkers) > 0 {
		body += "healthCheckers:\n" + strings.Join(slices.Sorted(maps.Values(id.checkers)), "")
	}
	if len(sats) == 0 {
		body = strings.Replace(body, "satellites:\n", "satellites: []\n", 1)
	}
	if len(ops) == 0 {
		body = strings.Replace(body, "operators:\n", "operators: []\n", 1)
	}
	tmp := id.roster + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, id.roster); err != nil {
		t.Fatal(err)
	}
}

// hubArgs are the hub flags for TLS and authentication with this identity.
func (id *identity) hubArgs() []string {
	return []string{"--roster", id.roster, "--tls-cert", id.cert, "--tls-key", id.key}
}

// satelliteArgs are the satellite flags for site.
func (id *identity) satelliteArgs(site string) []string {
	return []string{"--client-key", id.keyFiles[auth.SatelliteClientID(site)], "--hub-ca", id.ca}
}

// dialAs opens a TLS connection to the hub whose every RPC carries a fresh
// assertion of clientID ("" = no credentials).
func (id *identity) dialAs(t *testing.T, addr, clientID string, extra ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	tc, err := tlsutil.ClientConfig(id.ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
	if clientID != "" {
		k := id.keys[clientID]
		kid, _ := auth.Thumbprint(k.Public())
		opts = append(opts, grpc.WithPerRPCCredentials(&auth.ClientCredentials{Key: k, KID: kid, ClientID: clientID, Audience: "ironlink-hub"}))
	}
	cc, err := grpc.NewClient(addr, append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
