package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ironlink/ironlink/internal/boundedread"
)

// ReloadCheckInterval is the least time between two checks of the
// certificate and key files' modification times.
const ReloadCheckInterval = time.Second

// ServerConfig returns a server TLS configuration (TLS 1.2 minimum) serving
// the certificate chain in certFile with the private key in keyFile. Both
// files are checked for changes (modification time, size and symlink target)
// at most once per ReloadCheckInterval, during a handshake, and reloaded when
// they changed; a pair that fails to load (say, the certificate was replaced
// but not the key yet) is logged with slog.Default and the previous pair
// keeps being served until a good pair appears.
//
// When clientCAFile is not empty the server requires and verifies a client
// certificate issued by one of the CA certificates in that PEM bundle
// (mutual TLS); the bundle is read once.
//
// Errors: the initial pair or the CA bundle cannot be read or parsed.
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	r, err := newKeyPairReloader(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.get(), nil
		},
	}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientConfig returns a client TLS configuration (TLS 1.2 minimum).
//
//   - caFile: PEM bundle of the CA certificates that may sign the server's
//     certificate; empty means the system's roots.
//   - certFile, keyFile: a client certificate for mutual TLS (both or
//     neither), reloaded on change like ServerConfig's.
//   - serverName: the name to verify in the server's certificate; empty lets
//     gRPC use the host of the dial target.
//
// Errors: a file cannot be read or parsed, or only one of certFile and
// keyFile is given.
func ClientConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("server CA: %w", err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile != "" && keyFile != "":
		r, err := newKeyPairReloader(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.get(), nil
		}
	case certFile != "" || keyFile != "":
		return nil, errors.New("client certificate: give both the certificate and the key file, or neither")
	}
	return cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := boundedread.File(file, boundedread.SmallLimit)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", file)
	}
	return pool, nil
}

type stamp struct {
	target  string
	modTime time.Time
	size    int64
}

func statFile(name string) (stamp, error) {
	target, err := filepath.EvalSymlinks(name)
	if err != nil {
		return stamp{}, err
	}
	fi, err := os.Stat(target)
	if err != nil {
		return stamp{}, err
	}
	return stamp{target, fi.ModTime(), fi.Size()}, nil
}

// keyPairReloader serves a certificate pair, reloading it when its files change.
type keyPairReloader struct {
	certFile, keyFile string
	now               func() time.Time

	mu         sync.Mutex
	cert       *tls.Certificate
	certStamp  stamp
	keyStamp   stamp
	lastCheck  time.Time
	lastFailed [2]stamp
}

func newKeyPairReloader(certFile, keyFile string) (*keyPairReloader, error) {
	r := &keyPairReloader{certFile: certFile, keyFile: keyFile, now: time.Now}
	cs, err1 := statFile(certFile)
	ks, err2 := statFile(keyFile)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("certificate pair: %w", err)
	}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate pair %s, %s: %w", certFile, keyFile, err)
	}
	r.cert, r.certStamp, r.keyStamp, r.lastCheck = &cert, cs, ks, r.now()
	return r, nil
}

// loadKeyPair is tls.LoadX509KeyPair with the files read by boundedread
// (SmallLimit each): a wrong path such as /dev/zero or a named pipe is an
// error naming it instead of a process that reads until it runs out of
// memory or waits for ever.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := boundedread.File(certFile, boundedread.SmallLimit)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := boundedread.File(keyFile, boundedread.SmallLimit)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func (r *keyPairReloader) get() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.lastCheck) < ReloadCheckInterval {
		return r.cert
	}
	r.lastCheck = now
	cs, err1 := statFile(r.certFile)
	ks, err2 := statFile(r.keyFile)
	if err1 != nil || err2 != nil || (cs == r.certStamp && ks == r.keyStamp) {
		return r.cert
	}
	cert, err := loadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.lastFailed != [2]stamp{cs, ks} {
			r.lastFailed = [2]stamp{cs, ks}
			slog.Default().Warn("TLS certificate changed but does not load; serving the previous one", "cert", r.certFile, "key", r.keyFile, "err", err)
		}
		return r.cert
	}
	r.cert, r.certStamp, r.keyStamp = &cert, cs, ks
	subject := ""
	if leaf := cert.Leaf; leaf != nil {
		subject = leaf.Subject.String()
	}
	slog.Default().Info("TLS certificate reloaded", "cert", r.certFile, "subject", subject)
	return r.cert
}
