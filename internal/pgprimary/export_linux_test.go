//go:build linux

package pgprimary

import "time"

// SetUserTimeoutForTest sets the TCP_USER_TIMEOUT later dials use and
// returns a function that restores the previous value.
func SetUserTimeoutForTest(d time.Duration) (restore func()) {
	old := userTimeout
	userTimeout = d
	return func() { userTimeout = old }
}
