// Package healthsim is a health-checker simulator for the demo and for
// tests: it builds NVIDIA NVSentinel-shaped health events (the GPU XID
// errors that take GPU machines out of service, NVLink, thermal, PSU) and
// sends them through a satellite's local health door, NVSentinel's
// platform-connector interface (datamodels.PlatformConnector,
// HealthEventOccurredV1 on a Unix socket; docs/reference/health.md "The
// satellite's local door"). `ironlink-openstacksim health` is its command
// line; `make demo` uses it to show a GPU fault arriving, the device
// turning FAULTED and the demo's policy quarantining it.
package healthsim
