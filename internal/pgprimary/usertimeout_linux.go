package pgprimary

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// userTimeout is the TCP_USER_TIMEOUT setUserTimeout sets: UserTimeout,
// shortened by a test that waits for it.
var userTimeout = UserTimeout

// setUserTimeout sets TCP_USER_TIMEOUT (UserTimeout) on a TCP socket
// before it connects; other networks are left alone.
func setUserTimeout(network, _ string, rc syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
