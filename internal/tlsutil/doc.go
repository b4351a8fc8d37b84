// Package tlsutil builds the TLS configurations of the hub and of its
// clients (satellites, tools): TLS 1.2 or newer (RFC 5246, RFC 8446), the
// server's certificate and key read from files and reloaded when the files
// change (so cert-manager or a Secret update rotates them without a
// restart), optional mutual TLS (RFC 8446 §4.3.2 CertificateRequest) against
// a client CA bundle, and a small throwaway PKI for tests and `make demo`.
//
// Certificates and keys are PEM files: certificates as "CERTIFICATE" blocks
// (leaf first, then intermediates), keys as PKCS#8 "PRIVATE KEY", SEC 1
// "EC PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY" blocks.
package tlsutil
