// Package healthdoor is the satellite's local health door: a gRPC server on
// a Unix socket (--health-socket, mode 0660) speaking NVIDIA NVSentinel's
// platform-connector interface (datamodels.PlatformConnector,
// HealthEventOccurredV1), so node-local checkers report health with no
// hub credentials and no route to the hub. Reports wait in a bounded
// spool (--health-spool-events) and go to the hub over the satellite's
// link (ConnectRequest.health_report); a call answers once the hub
// committed or refused its batch (docs/reference/health.md "The
// satellite's local door").
package healthdoor
