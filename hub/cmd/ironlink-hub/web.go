package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ironlink/ironlink/hub/web"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/boundedread"
	"github.com/ironlink/ironlink/internal/cli"
)

// runWebProxy implements `ironlink-hub web-proxy`: the demo's token proxy in
// front of a fleet view in proxy mode (see web.DemoProxy).
//
//	ironlink-hub web-proxy --listen 127.0.0.1:7080 --upstream unix:.demo/web.sock --user demo-operator --token-file .demo/web-token
//
// --upstream repeats: the first that accepts a connection serves it (the
// demo names every replica's view, so the view outlives a killed replica).
func runWebProxy(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-hub web-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := cli.NewFlags(fs)
	fs.Usage = f.Usage("ironlink-hub web-proxy --listen ADDR --upstream unix:PATH|http://HOST:PORT [--upstream ...] --user CLIENT_ID --token-file FILE")
	var listen, user, tokenFile, header string
	f.String(&listen, "listen", "", "127.0.0.1:7080", "address the browser opens: a loopback address (127.0.0.1, ::1, localhost), anything else is refused")
	var upstreams upstreamList
	f.Var(&upstreams, "upstream", "the fleet view (--web-addr of a hub in --web-auth proxy mode): unix:PATH or http://host:port; repeat for other replicas, tried in order when one does not answer")
	f.String(&user, "user", "", "", "roster client id to forward every signed-in request as")
	f.String(&tokenFile, "token-file", "", "", "file holding the secret the browser presents once as ?token=")
	f.String(&header, "header", "", web.DefaultUserHeader, "user header the hub expects (--web-user-header)")
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("web-proxy: %w", err)
	}
	if len(upstreams) == 0 || tokenFile == "" {
		return errors.New("web-proxy: --upstream and --token-file are required")
	}
	if err := web.CheckLoopbackListen(listen); err != nil {
		return fmt.Errorf("web-proxy: --listen: %w", err)
	}
	tok, err := boundedread.File(tokenFile, boundedread.SmallLimit)
	if err != nil {
		return fmt.Errorf("web-proxy: %w", err)
	}
	p := &web.DemoProxy{Upstream: upstreams[0], Fallbacks: upstreams[1:], User: user, Token: strings.TrimSpace(string(tok)), Header: header}
	h, err := p.Handler()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(stderr, "web-proxy: serving http://%s/ as %s → %s\n", listen, user, strings.Join(upstreams, ", "))
	select {
	case err := <-errc:
		return fmt.Errorf("web-proxy: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// upstreamList is the repeatable --upstream flag of web-proxy.
type upstreamList []string

func (l *upstreamList) String() string { return strings.Join(*l, ",") }

func (l *upstreamList) Set(s string) error {
	if s == "" {
		return errors.New("empty upstream")
	}
	*l = append(*l, s)
	return nil
}

// runWebCert implements `ironlink-hub web-cert`: a self-signed client
// certificate over an operator's roster key, for the fleet view's mtls mode
// (the hub matches the certificate's public key with the roster, so no CA
// is involved). Import it into a browser as PKCS#12:
//
//	openssl pkcs12 -export -inkey KEY.pem -in CERT.pem -out operator.p12
func runWebCert(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ironlink-hub web-cert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := cli.NewFlags(fs)
	fs.Usage = f.Usage("ironlink-hub web-cert --key KEY.pem --client-id ID --out CERT.pem [--valid-for 8760h]")
	var keyPath, clientID, out string
	var validFor time.Duration
	f.String(&keyPath, "key", "", "", "the operator's private key (the one keygen wrote)")
	f.String(&clientID, "client-id", "", "", "roster client id (the certificate's CommonName)")
	f.String(&out, "out", "", "", "file to write the certificate to (PEM)")
	f.Duration(&validFor, "valid-for", "", 365*24*time.Hour, "certificate lifetime")
	if err := f.Parse(args); err != nil {
		return fmt.Errorf("web-cert: %w", err)
	}
	if keyPath == "" || clientID == "" || out == "" {
		return errors.New("web-cert: --key, --client-id and --out are required")
	}
	key, err := auth.LoadPrivateKey(keyPath)
	if err != nil {
		return fmt.Errorf("web-cert: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: clientID},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.Add(validFor),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("web-cert: %w", err)
	}
	if err := os.WriteFile(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("web-cert: %w", err)
	}
	fmt.Fprintf(stderr, "web-cert: wrote %s for client %s (valid until %s)\n", out, clientID, tmpl.NotAfter.UTC().Format(time.DateOnly))
	return nil
}
