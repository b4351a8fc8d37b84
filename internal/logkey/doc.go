// Package logkey names the structured-log (log/slog) attribute keys that
// both binaries log, so that one field has one name across the hub and the
// satellite (a device is "device_id" on both sides, never "node" on one).
// It holds constants only and imports nothing.
package logkey
