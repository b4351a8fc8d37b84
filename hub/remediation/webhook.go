package remediation

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/periodic"
)

// The repair handoff webhook (docs/reference/ironlink-hub.md
// "--handoff-webhook-url"): every handoff is POSTed as JSON to the
// configured URL until the receiver answers 2xx, retried with exponential
// backoff; each attempt is recorded. The body is signed with HMAC-SHA256
// under the configured secret.

// SignatureHeader carries "sha256=" and the lower-case hex HMAC-SHA256 of
// the request body under the webhook secret.
const SignatureHeader = "X-Ironlink-Signature-256"

// DeliveryHeader carries "<handoff id>-<attempt>": the same handoff keeps
// its id across attempts, so a receiver can drop a repeat.
const DeliveryHeader = "X-Ironlink-Delivery"

// EventHeader carries the event type, HandoffEventType.
const EventHeader = "X-Ironlink-Event"

// HandoffEventType is the webhook's event type.
const HandoffEventType = "repair_handoff"

// HandoffPayload is the webhook's JSON body.
type HandoffPayload struct {
	Type       string    `json:"type"`
	HandoffID  int64     `json:"handoff_id"`
	DeviceID   string    `json:"device_id"`
	DeviceName string    `json:"device_name"`
	Site       string    `json:"site"`
	Rule       string    `json:"rule"`
	Reason     string    `json:"reason"`
	Detail     string    `json:"detail"`
	LadderID   int64     `json:"ladder_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	Attempt    int       `json:"attempt"`
}

// Sign returns the SignatureHeader value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is body's SignatureHeader value under secret
// (constant time).
func Verify(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(sig))
}

// WebhookStore is what the webhook sender reads and records.
type WebhookStore interface {
	ClaimHandoffWebhooks(ctx context.Context, lease time.Duration, limit int) ([]store.Handoff, error)
	RecordWebhookAttempt(ctx context.Context, id int64, a store.WebhookAttempt, delivered bool, next time.Time) error
}

// WebhookConfig configures a WebhookSender.
type WebhookConfig struct {
	// URL receives the POSTs.
	URL string
	// Secret is the HMAC-SHA256 key.
	Secret []byte
	// Timeout bounds one attempt (default 10 s).
	Timeout time.Duration
	// InitialInterval and MaxInterval bound the backoff between attempts
	// (defaults 1 s and 10 min).
	InitialInterval, MaxInterval time.Duration
	// Interval is how often due deliveries are looked for (default 1 s).
	Interval time.Duration
	// Client sends the requests (default an http.Client with Timeout).
	Client *http.Client
}

// WebhookSender delivers handoff webhooks; run it on every replica (a
// delivery is claimed by one at a time).
type WebhookSender struct {
	st  WebhookStore
	cfg WebhookConfig
	log *slog.Logger
}

// NewWebhookSender returns a sender over st.
func NewWebhookSender(st WebhookStore, cfg WebhookConfig, log *slog.Logger) *WebhookSender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.InitialInterval <= 0 {
		cfg.InitialInterval = time.Second
	}
	if cfg.MaxInterval <= 0 {
		cfg.MaxInterval = 10 * time.Minute
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	return &WebhookSender{st: st, cfg: cfg, log: log}
}

// Run delivers due webhooks every Interval until ctx ends.
func (w *WebhookSender) Run(ctx context.Context) {
	periodic.NowAndEvery(ctx, w.cfg.Interval, func() {
		if _, err := w.Deliver(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("handoff webhook pass failed", logkey.Err, err)
		}
	})
}

// delay is the backoff after attempt n (1-based): exponential from
// InitialInterval, capped at MaxInterval, with jitter.
func (w *WebhookSender) delay(n int) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = w.cfg.InitialInterval, w.cfg.MaxInterval
	b.Reset()
	d := b.NextBackOff()
	for i := 1; i < n; i++ {
		d = b.NextBackOff()
	}
	return d
}

// Deliver sends every due webhook once and records the attempts; it
// returns how many were delivered.
func (w *WebhookSender) Deliver(ctx context.Context) (int, error) {
	hs, err := w.st.ClaimHandoffWebhooks(ctx, w.cfg.Timeout+w.cfg.Interval, 32)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range hs {
		a := w.send(ctx, h)
		delivered := a.StatusCode >= 200 && a.StatusCode < 300
		next := time.Now().Add(w.delay(a.Attempt))
		if err := w.st.RecordWebhookAttempt(ctx, h.ID, a, delivered, next); err != nil {
			return n, err
		}
		if delivered {
			n++
			w.log.Info("handoff webhook delivered", logkey.DeviceID, h.DeviceID, logkey.Site, h.Site, "handoff", h.ID, "attempt", a.Attempt)
		} else {
			w.log.Warn("handoff webhook attempt failed; retrying", logkey.DeviceID, h.DeviceID, logkey.Site, h.Site, "handoff", h.ID,
				"attempt", a.Attempt, "status_code", a.StatusCode, logkey.Err, a.Error, "next", next.UTC().Format(time.RFC3339))
		}
	}
	return n, nil
}

// send POSTs handoff h once.
func (w *WebhookSender) send(ctx context.Context, h store.Handoff) store.WebhookAttempt {
	a := store.WebhookAttempt{Attempt: h.WebhookAttempts + 1}
	body, _ := json.Marshal(HandoffPayload{Type: HandoffEventType, HandoffID: h.ID, DeviceID: h.DeviceID, DeviceName: h.DeviceName,
		Site: h.Site, Rule: h.Rule, Reason: h.Reason, Detail: h.Detail, LadderID: h.LadderID, CreatedAt: h.CreatedAt.UTC(),
		Attempt: a.Attempt}) // strings, numbers and a time: cannot fail
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		a.Error = err.Error()
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(w.cfg.Secret, body))
	req.Header.Set(DeliveryHeader, fmt.Sprintf("%d-%d", h.ID, a.Attempt))
	req.Header.Set(EventHeader, HandoffEventType)
	start := time.Now()
	resp, err := w.cfg.Client.Do(req)
	a.Duration = time.Since(start)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	a.StatusCode = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		a.Error = resp.Status
	}
	return a
}
