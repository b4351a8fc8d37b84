//go:build linux

package pgprimary

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// A connection the dialer opens carries TCP_USER_TIMEOUT (30 s) and TCP
// keepalives (first probe after 10 s idle, every 5 s, 4 probes), so a
// primary that vanished without closing its sockets is noticed within
// about 30 s, whether the connection was busy or idle.
func TestDialerSocketOptions(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := Dialer(DefaultConnectTimeout).Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ level, opt, value int }{
		"TCP_USER_TIMEOUT (ms)": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 30000},
		"SO_KEEPALIVE":          {unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		"TCP_KEEPIDLE (s)":      {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 10},
		"TCP_KEEPINTVL (s)":     {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 5},
		"TCP_KEEPCNT":           {unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 4},
	}
	for name, w := range want {
		var got int
		var gerr error
		if err := rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), w.level, w.opt) }); err != nil {
			t.Fatal(err)
		}
		if gerr != nil || got != w.value {
			t.Errorf("%s = %d (%v), want %d", name, got, gerr, w.value)
		}
	}
}
