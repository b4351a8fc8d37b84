package logkey

// Attribute keys logged by both ironlink-hub and ironlink-satellite.
const (
	// Site is a site name ([a-z0-9-], SPEC "site").
	Site = "site"
	// DeviceID is a device's id: the Ironic node UUID.
	DeviceID = "device_id"
	// CommandID is a quarantine/release command's UUID.
	CommandID = "command_id"
	// Generation is a device's desired-state (command) generation.
	Generation = "generation"
	// Replica is the name of a hub replica.
	Replica = "replica"
	// ClientID is an authenticated client's id (ironlink-agent-<site> for a satellite).
	ClientID = "client_id"
	// Err is the error of a failed step.
	Err = "err"
)
