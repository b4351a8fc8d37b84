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
	"sync"
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
	// Concurrency bounds the deliveries in flight at once (default 8):
	// each handoff is delivered on its own, so a receiver that does not
	// answer one delays no other.
	Concurrency int
}

// WebhookSender delivers handoff webhooks; run it on every replica (a
// delivery is claimed by one at a time).
type WebhookSender struct {
	st  WebhookStore
	cfg WebhookConfig
	log *slog.Logger
	// slots holds one token per delivery in flight (Concurrency).
	slots chan struct{}
	// wg counts the deliveries in flight.
	wg sync.WaitGroup
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
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	return &WebhookSender{st: st, cfg: cfg, log: log, slots: make(chan struct{}, cfg.Concurrency)}
}

// Run starts the due webhooks every Interval until ctx ends, each on its
// own (at most Concurrency at once), without waiting for those in flight;
// it returns once they have ended.
func (w *WebhookSender) Run(ctx context.Context) {
	periodic.NowAndEvery(ctx, w.cfg.Interval, func() {
		if _, err := w.dispatch(ctx, nil, nil); err != nil && ctx.Err() == nil {
			w.log.Warn("handoff webhook pass failed", logkey.Err, err)
		}
	})
	w.wg.Wait()
}

// dispatch claims as many due deliveries as there are free slots and
// starts each; add (when not nil) is called with their number before they
// start, done (when not nil) with each one's outcome.
func (w *WebhookSender) dispatch(ctx context.Context, done func(delivered bool), add func(int)) (int, error) {
	free := cap(w.slots) - len(w.slots)
	if free == 0 {
		return 0, nil
	}
	hs, err := w.st.ClaimHandoffWebhooks(ctx, w.cfg.Timeout+w.cfg.Interval, free)
	if err != nil {
		return 0, err
	}
	if add != nil {
		add(len(hs))
	}
	for _, h := range hs {
		w.slots <- struct{}{}
		w.wg.Add(1)
		go func() {
			defer func() { <-w.slots; w.wg.Done() }()
			ok := w.deliver(ctx, h)
			if done != nil {
				done(ok)
			}
		}()
	}
	return len(hs), nil
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

// Deliver sends the due webhooks once, each on its own (as many as there
// are free slots of Concurrency), records the attempts, and returns how
// many were delivered once all of them have ended.
func (w *WebhookSender) Deliver(ctx context.Context) (int, error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	_, err := w.dispatch(ctx, func(ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if ok {
			n++
		}
		wg.Done()
	}, wg.Add)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return n, err
}

// deliver sends handoff h once and records the attempt (even when ctx
// has ended meanwhile: the attempt was made); it reports a 2xx answer.
func (w *WebhookSender) deliver(ctx context.Context, h store.Handoff) bool {
	a := w.send(ctx, h)
	delivered := a.StatusCode >= 200 && a.StatusCode < 300
	next := time.Now().Add(w.delay(a.Attempt))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.st.RecordWebhookAttempt(rctx, h.ID, a, delivered, next); err != nil {
		w.log.Warn("recording a handoff webhook attempt failed (the attempt is made again after the claim's lease)", logkey.DeviceID, h.DeviceID,
			logkey.Site, h.Site, "handoff", h.ID, "attempt", a.Attempt, logkey.Err, err)
		return false
	}
	if delivered {
		w.log.Info("handoff webhook delivered", logkey.DeviceID, h.DeviceID, logkey.Site, h.Site, "handoff", h.ID, "attempt", a.Attempt)
	} else {
		w.log.Warn("handoff webhook attempt failed; retrying", logkey.DeviceID, h.DeviceID, logkey.Site, h.Site, "handoff", h.ID,
			"attempt", a.Attempt, "status_code", a.StatusCode, logkey.Err, a.Error, "next", next.UTC().Format(time.RFC3339))
	}
	return delivered
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
	a.AttemptedAt = start
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
