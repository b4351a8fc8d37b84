//go:build !linux

package pgprimary

import "syscall"

// setUserTimeout does nothing off Linux (no TCP_USER_TIMEOUT): the
// keepalives alone notice a dead peer on an idle connection.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
