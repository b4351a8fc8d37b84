package app

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/testlog"
)

// Under systemd (NOTIFY_SOCKET, WATCHDOG_USEC) the satellite says READY=1,
// feeds the watchdog, says in STATUS= why it is not ready when it is not,
// and STOPPING=1 at the end.
func TestNotifySystemdSpeaksSdNotify(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000") // 200 ms: fed every 100 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	var notReady atomic.Bool
	ready := func(time.Time) error {
		if notReady.Load() {
			return errors.New("hub link down for 3m0s")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { notifySystemd(ctx, ready, testlog.New(t)); close(done) }()

	read := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no sd_notify message: %v", err)
		}
		return string(buf[:n])
	}
	waitFor := func(want string) string {
		t.Helper()
		var seen []string
		for range 50 {
			m := read()
			if strings.Contains(m, want) {
				return m
			}
			seen = append(seen, m)
		}
		t.Fatalf("no message with %q; got %q", want, seen)
		return ""
	}
	if m := read(); m != "READY=1" {
		t.Fatalf("first message %q, want READY=1", m)
	}
	if m := waitFor("WATCHDOG=1"); !strings.Contains(m, "STATUS=ready") {
		t.Errorf("first watchdog message %q lacks STATUS=ready", m)
	}
	waitFor("WATCHDOG=1") // fed again, without a STATUS= repeat
	notReady.Store(true)
	if m := waitFor("STATUS=not ready"); !strings.Contains(m, "hub link down") || !strings.Contains(m, "WATCHDOG=1") {
		t.Errorf("message %q: want the reason and the watchdog still fed", m)
	}
	cancel()
	waitFor("STOPPING=1")
	<-done
}

// Without NOTIFY_SOCKET nothing is sent and the function returns at once.
func TestNotifySystemdOffWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	done := make(chan struct{})
	go func() {
		notifySystemd(context.Background(), func(time.Time) error { return nil }, testlog.New(t))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("notifySystemd kept running without NOTIFY_SOCKET")
	}
}

// Secrets come from $CREDENTIALS_DIRECTORY (LoadCredential=) when their
// setting is empty; an explicit setting wins; a missing credential leaves
// the setting empty (and Validate names it).
func TestSecretsFromSystemdCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"client-key", "clouds.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name                string
		credDir             string
		key, clouds, tlsKey string
		wantKey, wantClouds string
		wantTLSKey          string
	}{
		{name: "both from credentials", credDir: dir, wantKey: filepath.Join(dir, "client-key"), wantClouds: filepath.Join(dir, "clouds.yaml")},
		{name: "explicit setting wins", credDir: dir, key: "/etc/k.pem", wantKey: "/etc/k.pem", wantClouds: filepath.Join(dir, "clouds.yaml")},
		{name: "no credentials directory", credDir: ""},
		{name: "missing credential stays empty", credDir: t.TempDir()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CREDENTIALS_DIRECTORY", tc.credDir)
			var c Options
			c.Identity.KeyFile, c.OpenStack.CloudsYAML, c.Identity.ClientKey = tc.key, tc.clouds, tc.tlsKey
			c.fromCredentials()
			if c.Identity.KeyFile != tc.wantKey || c.OpenStack.CloudsYAML != tc.wantClouds || c.Identity.ClientKey != tc.wantTLSKey {
				t.Errorf("key %q clouds %q tls key %q; want %q %q %q", c.Identity.KeyFile, c.OpenStack.CloudsYAML, c.Identity.ClientKey,
					tc.wantKey, tc.wantClouds, tc.wantTLSKey)
			}
		})
	}
}
