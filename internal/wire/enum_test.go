package wire

import (
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

func TestEnumName(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"status", EnumName(ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED, "OPERATIONAL_STATUS_"), "FAULTED"},
		{"unspecified is empty", EnumName(ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_UNSPECIFIED, "OPERATIONAL_STATUS_"), ""},
		{"command state", EnumName(ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, "COMMAND_STATE_"), "SUCCEEDED"},
		{"link state", EnumName(ironlinkv1.LinkState_LINK_STATE_CONNECTED, "LINK_STATE_"), "CONNECTED"},
		{"unknown number keeps its String", EnumName(ironlinkv1.LinkState(99), "LINK_STATE_"), "99"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}
