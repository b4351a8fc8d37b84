package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// File names GenerateTestPKI and IssueClientCert write in their directory.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
)

// TestPKIValidity is how long the certificates of GenerateTestPKI and
// IssueClientCert are valid (from one hour before they are made).
const TestPKIValidity = 90 * 24 * time.Hour

// GenerateTestPKI writes a throwaway PKI into dir (created if missing): a
// self-signed ECDSA P-256 CA (ca.pem, key ca-key.pem) and a server
// certificate it signs (server.pem, key server-key.pem) for the names
// localhost, 127.0.0.1 and ::1, valid for TestPKIValidity. Keys are PKCS#8
// PEM, mode 0600; existing files are replaced. It returns the paths of the CA
// bundle, the server certificate and the server key. For tests and
// `make demo` only: the CA key sits next to the certificates.
func GenerateTestPKI(dir string) (caFile, certFile, keyFile string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", "", fmt.Errorf("test PKI: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", fmt.Errorf("test PKI: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "ironlink test CA", Organization: []string{"ironlink"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(TestPKIValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return "", "", "", fmt.Errorf("test PKI: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", "", fmt.Errorf("test PKI: %w", err)
	}
	caFile = filepath.Join(dir, CAFile)
	if err := writePEM(caFile, "CERTIFICATE", caDER, 0o644); err != nil {
		return "", "", "", err
	}
	if err := writeKey(filepath.Join(dir, CAKeyFile), caKey); err != nil {
		return "", "", "", err
	}
	certFile, keyFile = filepath.Join(dir, ServerFile), filepath.Join(dir, ServerKeyFile)
	err = issue(ca, caKey, certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost", Organization: []string{"ironlink"}},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return "", "", "", err
	}
	return caFile, certFile, keyFile, nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// IssueClientCert signs a client certificate (ExtKeyUsage clientAuth) with
// the CA that GenerateTestPKI wrote into dir, for mutual TLS: Subject
// CommonName = commonName (a client id), plus a DNS SAN of the same value
// when it is a valid DNS label. It writes client-<name>.pem and
// client-<name>-key.pem (mode 0600) into dir and returns their paths.
func IssueClientCert(dir, commonName string) (certFile, keyFile string, err error) {
	if commonName == "" {
		return "", "", errors.New("client certificate: common name is required")
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: []string{"ironlink"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if dnsLabel.MatchString(commonName) {
		tmpl.DNSNames = []string{commonName}
	}
	base := "client-" + regexp.MustCompile(`[^A-Za-z0-9._-]`).ReplaceAllString(commonName, "_")
	certFile, keyFile = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem")
	if err := issue(ca, caKey, certFile, keyFile, tmpl); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("test CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("test CA: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("test CA in %s: no PEM block", dir)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("test CA: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("test CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("test CA key: %T cannot sign", k)
	}
	return ca, signer, nil
}

// issue makes a fresh P-256 key, has ca sign tmpl for it, and writes both.
func issue(ca *x509.Certificate, caKey crypto.Signer, certFile, keyFile string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(TestPKIValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	// Key first: a reloader that sees the new certificate finds its key.
	if err := writeKey(keyFile, key); err != nil {
		return err
	}
	return writePEM(certFile, "CERTIFICATE", der, 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM writes one PEM block atomically (temporary file, then rename).
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}
