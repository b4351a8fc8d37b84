package condition

// HardwareMatchesProfile is the hub's condition of a device whose hardware
// (read from Ironic's inventory and BIOS settings by its satellite) is
// checked against the hardware profile that applies to it
// (docs/reference/conditions.md "HardwareMatchesProfile"). The hub makes
// it (hub/hwprofile); a satellite never sends it.
const HardwareMatchesProfile Type = "HardwareMatchesProfile"

// Reasons of HardwareMatchesProfile.
const (
	// ReasonProfileMatches (True): every expectation of the profile holds.
	ReasonProfileMatches = "Matches"
	// ReasonProfileMismatch (False): an expectation does not hold; a
	// warning, the status stays.
	ReasonProfileMismatch = "Mismatch"
	// ReasonProfileMismatchFault (False): an expectation does not hold
	// and the profile says fault: true; the device is FAULTED.
	ReasonProfileMismatchFault = "MismatchFault"
	// ReasonNoInventory (Unknown): Ironic has no inventory for the node.
	ReasonNoInventory = "NoInventory"
	// ReasonNoProfile (Unknown): no profile applies to the device any
	// more.
	ReasonNoProfile = "NoProfile"
)

// hardwareFault reports whether c is a HardwareMatchesProfile mismatch
// whose profile makes it a fault.
func (c Condition) hardwareFault() bool {
	return c.Type == HardwareMatchesProfile && c.Status == False && c.Reason == ReasonProfileMismatchFault
}

// hardwareWarning reports whether c is a HardwareMatchesProfile mismatch
// that is a warning.
func (c Condition) hardwareWarning() bool {
	return c.Type == HardwareMatchesProfile && c.Status == False && c.Reason != ReasonProfileMismatchFault
}
