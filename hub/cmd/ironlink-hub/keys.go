package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/cli"
	"github.com/ironlink/ironlink/internal/tlsutil"
)

// runKeygen implements `ironlink-hub keygen`: it creates a key pair for one
// roster client, writes the private key (PKCS#8 PEM, mode 0600) to --out and
// prints the roster entry, with the public key, on stdout.
//
//	ironlink-hub keygen --client-id ID [--site S] [--scopes a,b] [--alg ES256|RS256|EdDSA] [--kid K] --out key.pem [--force]
//
// A client id ironlink-agent-<site> (or --site) makes a satellite entry
// (default scopes device:update, device-condition:create); anything else an
// operator entry (default scope operations:read). The default kid is the
// key's RFC 7638 thumbprint.
func runKeygen(args []string) error { return keygenTo(args, os.Stdout, os.Stderr) }

func keygenTo(args []string, stdout, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-hub keygen", "ironlink-hub keygen --client-id ID [--site S] [--scopes a,b] [--alg ES256|RS256|EdDSA] [--kid K] --out key.pem [--force]", stderr)
	var clientID, site, scopes, alg, kid, out string
	var force bool
	f.String(&clientID, "client-id", "", "", "roster client id: ironlink-agent-<site> for a satellite, any other name for an operator")
	f.String(&site, "site", "", "", "the satellite's site (default: from an ironlink-agent-<site> client id; empty for an operator)")
	f.String(&scopes, "scopes", "", "", "comma-separated scopes (default device:update,device-condition:create for a satellite, operations:read for an operator)")
	f.String(&alg, "alg", "", auth.AlgES256, "key algorithm: ES256, RS256 or EdDSA")
	f.String(&kid, "kid", "", "", "key id (default: the key's RFC 7638 thumbprint)")
	f.String(&out, "out", "", "", "file to write the private key to (PKCS#8 PEM, mode 0600)")
	f.Bool(&force, "force", false, "replace --out if it exists")
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if clientID == "" || out == "" {
		return errors.New("keygen: --client-id and --out are required")
	}
	if site == "" && strings.HasPrefix(clientID, auth.SatellitePrefix) {
		site = strings.TrimPrefix(clientID, auth.SatellitePrefix)
	}
	var sc []string
	switch {
	case scopes != "":
		for _, s := range strings.Split(scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sc = append(sc, s)
			}
		}
	case site != "":
		sc = []string{auth.ScopeDeviceUpdate, auth.ScopeDeviceConditionCreate}
	default:
		sc = []string{auth.ScopeOperationsRead}
	}
	if !force {
		if _, err := os.Lstat(out); err == nil {
			return fmt.Errorf("keygen: %s exists (use --force to replace it)", out)
		}
	}
	key, err := auth.GenerateKey(alg)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if kid == "" {
		if kid, err = auth.Thumbprint(key); err != nil {
			return fmt.Errorf("keygen: %w", err)
		}
	}
	entry, err := auth.FormatRosterEntry(clientID, site, sc, kid, key.Public())
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	section := "operators"
	if site != "" {
		section = "satellites"
	}
	// Validate the entry exactly as the hub will read it, before writing anything.
	if _, err := auth.ParseRoster([]byte(section + ":\n" + entry)); err != nil {
		return fmt.Errorf("keygen: the roster would refuse this entry: %w", err)
	}
	if err := auth.WritePrivateKeyPEM(out, key); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(stderr, "wrote %s private key to %s (keep it secret); add this entry under %s: in the hub's roster (chart values.yaml):\n", alg, out, section)
	fmt.Fprintf(stdout, "# %s:\n%s", section, entry)
	return nil
}

// runToken implements `ironlink-hub token`: it prints one fresh client
// assertion (RFC 7523) signed with --key, for
//
//	grpcurl -H "authorization: Bearer $(ironlink-hub token --key ops.pem --client-id ops-console)" ...
//
// Flags fall back to IRONLINK_CLIENT_KEY, IRONLINK_CLIENT_ID,
// IRONLINK_CLIENT_KID and IRONLINK_HUB_AUDIENCE. The default kid is the
// key's RFC 7638 thumbprint (keygen's default).
func runToken(args []string) error { return tokenTo(args, os.Stdout, os.Stderr) }

func tokenTo(args []string, stdout, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-hub token", "ironlink-hub token --key key.pem --client-id ID [--kid K] [--audience AUD] [--lifetime 2m]", stderr)
	var keyFile, clientID, kid, audience string
	var lifetime time.Duration
	f.String(&keyFile, "key", "IRONLINK_CLIENT_KEY", "", "private key file (PEM)")
	f.String(&clientID, "client-id", "IRONLINK_CLIENT_ID", "", "roster client id")
	f.String(&kid, "kid", "IRONLINK_CLIENT_KID", "", "key id in the roster (env IRONLINK_CLIENT_KID; default: the key's RFC 7638 thumbprint)")
	f.String(&audience, "audience", "IRONLINK_HUB_AUDIENCE", auth.DefaultAudience, "the hub's audience")
	f.Duration(&lifetime, "lifetime", "", 2*time.Minute, "token lifetime (the hub refuses more than its maximum, 5m by default)")
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if keyFile == "" || clientID == "" {
		return errors.New("token: --key and --client-id are required")
	}
	key, err := auth.LoadPrivateKey(keyFile)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if kid == "" {
		if kid, err = auth.Thumbprint(key); err != nil {
			return fmt.Errorf("token: %w", err)
		}
	}
	tok, err := auth.Sign(key, kid, clientID, audience, lifetime, time.Now())
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// runDevPKI implements `ironlink-hub dev-pki`, for `make demo` and local
// development only: it writes a throwaway CA, a server certificate for
// localhost/127.0.0.1/::1 and, per --client, a client certificate for mutual
// TLS into --dir (see tlsutil.GenerateTestPKI), and prints the file paths as
// assignments of the environment variables that read them: the hub's
// IRONLINK_TLS_CERT and IRONLINK_TLS_KEY, the satellite's IRONLINK_HUB_CA
// and, with --client, the hub's IRONLINK_TLS_CLIENT_CA. Each client's
// certificate and key (the satellite's IRONLINK_TLS_CLIENT_CERT and
// IRONLINK_TLS_CLIENT_KEY) are named on stderr.
//
//	ironlink-hub dev-pki --dir .demo/pki [--client ironlink-agent-demo,ops-console]
func runDevPKI(args []string) error { return devPKITo(args, os.Stdout, os.Stderr) }

func devPKITo(args []string, stdout, stderr io.Writer) error {
	f := cli.NewCommand("ironlink-hub dev-pki", "ironlink-hub dev-pki --dir DIR [--client ID,ID]", stderr)
	var dir, clients string
	f.String(&dir, "dir", "", "", "directory to write the CA, server and client certificates into")
	f.String(&clients, "client", "", "", "comma-separated client ids to issue mutual-TLS client certificates for")
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("dev-pki: %w", err)
	}
	if dir == "" {
		return errors.New("dev-pki: --dir is required")
	}
	ca, cert, key, err := tlsutil.GenerateTestPKI(dir)
	if err != nil {
		return fmt.Errorf("dev-pki: %w", err)
	}
	fmt.Fprintf(stdout, "# ironlink-hub (server certificate)\nIRONLINK_TLS_CERT=%s\nIRONLINK_TLS_KEY=%s\n", cert, key)
	fmt.Fprintf(stdout, "# ironlink-satellite (CA to verify the hub; also grpcurl -cacert)\nIRONLINK_HUB_CA=%s\n", ca)
	issued := 0
	for _, id := range strings.Split(clients, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		c, k, err := tlsutil.IssueClientCert(dir, id)
		if err != nil {
			return fmt.Errorf("dev-pki: %w", err)
		}
		issued++
		fmt.Fprintf(stderr, "client certificate for %s: IRONLINK_TLS_CLIENT_CERT=%s IRONLINK_TLS_CLIENT_KEY=%s\n", id, c, k)
	}
	if issued > 0 {
		fmt.Fprintf(stdout, "# ironlink-hub, for mutual TLS (every client then needs a certificate)\nIRONLINK_TLS_CLIENT_CA=%s\n", ca)
	}
	return nil
}
