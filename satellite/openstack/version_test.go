package openstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
)

func TestParseMicroversion(t *testing.T) {
	for in, w := range map[string]Microversion{"1.65": {1, 65}, "v1.0": {1, 0}, " 2.10 ": {2, 10}} {
		got, err := ParseMicroversion(in)
		if err != nil || got != w {
			t.Errorf("ParseMicroversion(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "latest", "1", "1.x", "-1.2", "1.-2"} {
		if _, err := ParseMicroversion(in); err == nil {
			t.Errorf("ParseMicroversion(%q): no error", in)
		}
	}
	if !(Microversion{1, 9}).Less(Microversion{1, 10}) || (Microversion{2, 0}).Less(Microversion{1, 99}) {
		t.Error("Less is not numeric")
	}
}

func TestParseVersionDocument(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want VersionRange
	}{
		"ironic v1": {`{"id":"v1","version":{"id":"v1","status":"CURRENT","min_version":"1.1","version":"1.82"}}`, VersionRange{Microversion{1, 1}, Microversion{1, 82}}},
		"ironic root": {`{"name":"OpenStack Ironic API","default_version":{"id":"v1","min_version":"1.1","version":"1.82"},"versions":[{"id":"v1","status":"CURRENT","min_version":"1.1","version":"1.82"}]}`,
			VersionRange{Microversion{1, 1}, Microversion{1, 82}}},
		"placement root": {`{"versions":[{"id":"v1.0","max_version":"1.39","min_version":"1.0","status":"CURRENT"}]}`, VersionRange{Microversion{1, 0}, Microversion{1, 39}}},
	} {
		got, err := ParseVersionDocument([]byte(tc.body), 1)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v", name, got, err)
		}
	}
	for _, bad := range []string{`{}`, `not json`, `{"id":"v1"}`, `{"versions":[{"id":"v2.0","max_version":"2.3"}]}`} {
		if _, err := ParseVersionDocument([]byte(bad), 1); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestNegotiate(t *testing.T) {
	r := VersionRange{Microversion{1, 1}, Microversion{1, 82}}
	if v, err := r.Negotiate("ironic", IronicPreferred, IronicRequired); err != nil || v != (Microversion{1, 65}) {
		t.Errorf("1.82 server: %v %v", v, err)
	}
	r.Max = Microversion{1, 46}
	if v, err := r.Negotiate("ironic", IronicPreferred, IronicRequired); err != nil || v != (Microversion{1, 46}) {
		t.Errorf("1.46 server: %v %v", v, err)
	}
	r.Max = Microversion{1, 36}
	if _, err := r.Negotiate("ironic", IronicPreferred, IronicRequired); err == nil {
		t.Error("1.36 server accepted")
	}
	r = VersionRange{Microversion{1, 70}, Microversion{1, 90}}
	if _, err := r.Negotiate("ironic", IronicPreferred, IronicRequired); err == nil {
		t.Error("server whose minimum is above our preference accepted")
	}
	p := VersionRange{Microversion{1, 0}, Microversion{1, 17}}
	if v, err := p.Negotiate("placement", PlacementPreferred, PlacementRequired); err != nil || v != (Microversion{1, 17}) {
		t.Errorf("placement 1.17: %v %v", v, err)
	}
}

func TestValidateTraitName(t *testing.T) {
	for _, ok := range []string{"CUSTOM_CUSTOMER_READY", "HW_CPU_X86_AVX2"} {
		if err := ValidateTraitName(ok, false); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := ValidateTraitName("HW_CPU_X86_AVX2", true); err == nil {
		t.Error("standard trait accepted as custom")
	}
	for _, bad := range []string{"", "CUSTOM_", "custom_x", "CUSTOM-X", string(make([]byte, 256))} {
		if err := ValidateTraitName(bad, true); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReauthMargin(t *testing.T) {
	now := time.Now()
	if m := reauthMargin(time.Time{}, now); m != maxReauthMargin {
		t.Errorf("unknown expiry: %v", m)
	}
	if m := reauthMargin(now.Add(2*time.Hour), now); m != maxReauthMargin {
		t.Errorf("2h token: %v", m)
	}
	if m := reauthMargin(now.Add(4*time.Second), now); m != time.Second {
		t.Errorf("4s token: %v", m)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestIsTransientAndAuth(t *testing.T) {
	code := func(c int) error {
		return fmt.Errorf("wrapped: %w", gophercloud.ErrUnexpectedResponseCode{Actual: c})
	}
	for _, c := range []int{502, 503, 504} {
		if !IsTransient(code(c)) {
			t.Errorf("%d not transient", c)
		}
	}
	for _, c := range []int{400, 401, 404, 409, 500} {
		if IsTransient(code(c)) {
			t.Errorf("%d transient", c)
		}
	}
	var ne net.Error = timeoutErr{}
	if !IsTransient(&net.OpError{Op: "read", Err: ne}) || !IsTransient(io.ErrUnexpectedEOF) {
		t.Error("network errors not transient")
	}
	if IsTransient(context.Canceled) || IsTransient(nil) {
		t.Error("cancel/nil transient")
	}
	if !IsAuthError(code(401)) || !IsAuthError(&gophercloud.ErrUnableToReauthenticate{}) || IsAuthError(code(403)) {
		t.Error("IsAuthError")
	}
	after := &gophercloud.ErrErrorAfterReauthentication{}
	after.ErrOriginal = gophercloud.ErrUnexpectedResponseCode{Actual: 401}
	if !IsAuthError(after) || StatusCode(after) != 401 {
		t.Error("401 after reauth not an auth error")
	}
}

func TestRetry(t *testing.T) {
	p := RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond, MaxAttempts: 4, Budget: time.Second}
	ctx := context.Background()

	n := 0
	v, attempts, err := Retry(ctx, p, nil, "op", nil, func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusServiceUnavailable}
		}
		return 7, nil
	})
	if v != 7 || attempts != 3 || err != nil {
		t.Errorf("retry then success: %v %d %v", v, attempts, err)
	}

	_, attempts, err = Retry(ctx, p, nil, "op", nil, func(context.Context) (int, error) {
		return 0, gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusBadGateway}
	})
	var re *RetryError
	if attempts != 4 || !errors.As(err, &re) || re.Attempts != 4 || StatusCode(err) != 502 {
		t.Errorf("exhausted: %d %v", attempts, err)
	}

	_, attempts, err = Retry(ctx, p, nil, "op", nil, func(context.Context) (int, error) {
		return 0, gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusBadRequest}
	})
	if attempts != 1 || StatusCode(err) != 400 || errors.As(err, &re) {
		t.Errorf("permanent: %d %v", attempts, err)
	}

	// An attempt that runs into AttemptTimeout is retried.
	p.AttemptTimeout = 5 * time.Millisecond
	n = 0
	_, attempts, err = Retry(ctx, p, nil, "op", func(error) bool { return false }, func(ctx context.Context) (int, error) {
		n++
		if n == 1 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 1, nil
	})
	if attempts != 2 || err != nil {
		t.Errorf("attempt timeout: %d %v", attempts, err)
	}

	// A cancelled caller stops at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, attempts, err = Retry(cctx, p, nil, "op", nil, func(ctx context.Context) (int, error) {
		return 0, gophercloud.ErrUnexpectedResponseCode{Actual: 503}
	})
	if attempts != 1 || err == nil {
		t.Errorf("cancelled: %d %v", attempts, err)
	}
}
