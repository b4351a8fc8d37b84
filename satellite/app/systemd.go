package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifySystemd speaks sd_notify(3) when the satellite runs as a systemd
// service with Type=notify (NOTIFY_SOCKET set; without it every call is a
// no-op). It sends READY=1 at once — the satellite is started: its config
// is valid, its listener bound and its link client running; readiness in
// the probe sense is /readyz and the STATUS= line — then, when WatchdogSec=
// is set, WATCHDOG=1 every half watchdog interval for as long as ready
// answers (a wedged process stops answering and systemd restarts it), and
// STATUS= whenever readiness changes. A satellite that is merely not ready
// (hub or OpenStack down) keeps its watchdog fed: restarting it would not
// help. It returns when ctx ends, after STOPPING=1.
func notifySystemd(ctx context.Context, ready func(time.Time) error, log *slog.Logger) {
	sent, err := daemon.SdNotify(false, daemon.SdNotifyReady)
	if err != nil {
		log.Warn("sd_notify READY=1 failed", "err", err)
	}
	if !sent {
		return // not under systemd's notify protocol
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("systemd watchdog settings unreadable; not feeding it", "err", err)
	}
	every := interval / 2
	if every <= 0 {
		every = 10 * time.Second // STATUS= updates only
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := "?"
	for {
		answered := make(chan error, 1)
		go func() { answered <- ready(time.Now()) }()
		select {
		case <-ctx.Done():
			_, _ = daemon.SdNotify(false, daemon.SdNotifyStopping)
			return
		case rerr := <-answered:
			state := "ready"
			if rerr != nil {
				state = "not ready: " + rerr.Error()
			}
			msg := ""
			if interval > 0 {
				msg = daemon.SdNotifyWatchdog
			}
			if state != last {
				msg += "\nSTATUS=" + state
				last = state
			}
			if msg != "" {
				_, _ = daemon.SdNotify(false, msg)
			}
		case <-time.After(every):
			// ready did not answer within the interval: skip this feed.
		}
		select {
		case <-ctx.Done():
			_, _ = daemon.SdNotify(false, daemon.SdNotifyStopping)
			return
		case <-t.C:
		}
	}
}

// fromCredentials fills the secret file settings left empty from systemd
// credentials ($CREDENTIALS_DIRECTORY, set by LoadCredential= in the unit):
// client-key (the hub client assertion key), clouds.yaml, and
// tls-client-key. A setting given explicitly wins; a credential that is
// not there leaves the setting empty.
func (c *Options) fromCredentials() {
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return
	}
	for _, f := range []struct {
		p    *string
		name string
	}{
		{&c.Identity.KeyFile, "client-key"},
		{&c.OpenStack.CloudsYAML, "clouds.yaml"},
		{&c.Identity.ClientKey, "tls-client-key"},
	} {
		if *f.p != "" {
			continue
		}
		path := filepath.Join(dir, f.name)
		if _, err := os.Stat(path); err == nil {
			*f.p = path
		}
	}
}
