package ctl

import (
	"fmt"
	"strings"
)

// InventoryEntry is one RPC of an operator service and the `ironlink`
// commands that call it.
type InventoryEntry struct {
	// RPC is "Service/Method" in package ironlink.v1, e.g.
	// "FleetService/ListDevices".
	RPC string
	// Commands are the CLI commands reaching it, as typed (without flags
	// unless a flag is what reaches it), e.g. "ironlink get devices".
	Commands []string
}

// NonOperatorServices are the services of ironlink.v1 the CLI does not
// call, and why: they serve satellites and health reporters, not
// operators.
var NonOperatorServices = map[string]string{
	"LinkService":       "the satellites' link (scope site)",
	"HealthService":     "health reporters on or near the machines (scope device-health:create)",
	"ValidationService": "validation checkers recording their checks' results (scope device-health:create)",
}

// Inventory maps every RPC of every operator service (FleetService,
// OperationService, PolicyService, BulkService, RemediationService) to the
// CLI commands that reach it. TestInventoryCoversEveryRPC fails when an RPC is missing, a
// command does not exist, or docs/reference/cli.md lacks the table
// (InventoryMarkdown).
var Inventory = []InventoryEntry{
	{"FleetService/ListDevices", []string{"ironlink get devices", "ironlink describe site", "ironlink holds"}},
	{"FleetService/GetDevice", []string{"ironlink describe device", "ironlink get devices NAME", "ironlink get devices -o wide"}},
	{"FleetService/QuarantineDevice", []string{"ironlink quarantine"}},
	{"FleetService/ReleaseDevice", []string{"ironlink release"}},
	{"FleetService/OfferDevice", []string{"ironlink offer"}},
	{"FleetService/GetCommand", []string{"ironlink get commands ID", "ironlink quarantine --wait"}},
	{"FleetService/ListCommands", []string{"ironlink get commands", "ironlink describe device"}},
	{"FleetService/ListSites", []string{"ironlink get sites", "ironlink describe site"}},
	{"FleetService/RetryCommand", []string{"ironlink retry"}},
	{"FleetService/WatchFleet", []string{"ironlink watch", "ironlink events"}},
	{"OperationService/StartOperation", []string{"ironlink op start", "ironlink op retry"}},
	{"OperationService/GetOperation", []string{"ironlink op get", "ironlink op start --wait"}},
	{"OperationService/ListOperations", []string{"ironlink get operations", "ironlink op list"}},
	{"OperationService/CancelOperation", []string{"ironlink op cancel"}},
	{"OperationService/WatchOperation", []string{"ironlink op watch"}},
	{"PolicyService/GetEffectivePolicy", []string{"ironlink policy show"}},
	{"PolicyService/ListPolicyDecisions", []string{"ironlink get decisions"}},
	{"PolicyService/ListPendingActions", []string{"ironlink get pending"}},
	{"PolicyService/ApprovePendingActions", []string{"ironlink approve"}},
	{"PolicyService/RejectPendingActions", []string{"ironlink reject"}},
	{"PolicyService/ListSitePolicyStates", []string{"ironlink policy states", "ironlink policy guard"}},
	{"PolicyService/SetDeviceHold", []string{"ironlink holds set"}},
	{"PolicyService/ClearDeviceHold", []string{"ironlink holds clear"}},
	{"PolicyService/ReplayPolicy", []string{"ironlink policy replay"}},
	{"BulkService/PreviewBulkImpairment", []string{"ironlink quarantine --selector", "ironlink release --selector", "ironlink watch -l"}},
	{"BulkService/BulkQuarantine", []string{"ironlink quarantine --selector"}},
	{"BulkService/BulkRelease", []string{"ironlink release --selector"}},
	{"RemediationService/GetDeviceRemediation", []string{"ironlink explain"}},
	{"RemediationService/ListHandoffs", []string{"ironlink handoffs"}},
	{"RemediationService/CloseHandoff", []string{"ironlink handoffs close"}},
	{"HardwareService/GetFleetDrift", []string{"ironlink drift"}},
	{"HardwareService/ListHardwareHistory", []string{"ironlink hardware history"}},
	{"HardwareService/ListValidationRuns", []string{"ironlink validate runs"}},
}

// InventoryMarkdown renders Inventory as the Markdown table of
// docs/reference/cli.md ("Every RPC, the command that reaches it").
func InventoryMarkdown() string {
	var b strings.Builder
	b.WriteString("| RPC | `ironlink` command |\n|---|---|\n")
	for _, e := range Inventory {
		cmds := make([]string, len(e.Commands))
		for i, c := range e.Commands {
			cmds[i] = "`" + c + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", e.RPC, strings.Join(cmds, ", "))
	}
	return b.String()
}
