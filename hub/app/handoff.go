package app

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/ironlink/ironlink/internal/boundedread"
)

// HandoffWebhook configures the repair handoff webhook
// (docs/reference/ironlink-hub.md "Repair handoff webhook"): every handoff
// of a remediation ladder is POSTed as JSON to URL, signed with
// HMAC-SHA256 under the secret in SecretFile (header
// X-Ironlink-Signature-256), and retried with backoff until a 2xx.
type HandoffWebhook struct {
	// URL is the receiver (http or https); "" = no webhook (handoffs are
	// still recorded and in the change feed).
	URL string
	// SecretFile holds the HMAC key (required with URL; at least 16
	// bytes; read at start).
	SecretFile string
	// Timeout bounds one attempt (default 10 s).
	Timeout time.Duration
}

// maxSecretBytes bounds the webhook secret file.
const maxSecretBytes = 4096

// validate checks the webhook flags.
func (h HandoffWebhook) validate() error {
	if h.URL == "" {
		if h.SecretFile != "" {
			return errors.New("--handoff-webhook-secret-file without --handoff-webhook-url")
		}
		return nil
	}
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--handoff-webhook-url %q: want an http or https URL", h.URL)
	}
	if h.SecretFile == "" {
		return errors.New("--handoff-webhook-url needs --handoff-webhook-secret-file (the HMAC-SHA256 key)")
	}
	if h.Timeout < 0 {
		return fmt.Errorf("--handoff-webhook-timeout %s is negative", h.Timeout)
	}
	return nil
}

// Secret reads the HMAC key from SecretFile (at least 16 bytes, surrounding
// white space trimmed).
func (h HandoffWebhook) Secret() ([]byte, error) {
	b, err := boundedread.File(h.SecretFile, maxSecretBytes)
	if err != nil {
		return nil, fmt.Errorf("--handoff-webhook-secret-file: %w", err)
	}
	b = bytes.TrimSpace(b) // a trailing newline is not part of the key
	if len(b) < 16 {
		return nil, fmt.Errorf("--handoff-webhook-secret-file: %d bytes, want at least 16", len(b))
	}
	return b, nil
}
