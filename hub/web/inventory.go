package web

import (
	"fmt"
	"strings"
)

// InventoryEntry is one RPC of an operator service and the fleet view's
// routes that call it.
type InventoryEntry struct {
	// RPC is "Service/Method" in package ironlink.v1, e.g.
	// "FleetService/ListDevices".
	RPC string
	// Routes are the view's mux patterns ("GET /devices/{id}",
	// "POST /holds") whose handlers call the RPC's handler.
	Routes []string
}

// Inventory maps every RPC of every operator service (those the CLI's
// inventory covers: all of ironlink.v1 but the link, health and
// validation reporters' services) to the routes of the view whose
// handlers call the RPC's own handler in the hub's process. Three read the
// same rows instead, to sort by any column and filter by a selector: the
// device list (GET /devices) runs ListDevices' filters as one keyset query
// of its own, held equal to ListDevices by TestListMatchesListDevices; the
// operations and commands lists (GET /operations, GET /commands) run
// ListOperations' and ListCommands' filters as queries of their own, held
// equal to them by TestOperationAndCommandListsMatchTheAPI. The streaming RPCs run in the process too
// (callStream): GET /events reads WatchFleet from the feed's oldest
// change, an operation page's live region waits on WatchOperation. TestInventoryCoversEveryRPC fails when an operator RPC is missing,
// a route is not registered, or docs/reference/web.md lacks the table
// (InventoryMarkdown).
var Inventory = []InventoryEntry{
	{"FleetService/ListDevices", []string{"GET /devices"}},
	{"FleetService/GetDevice", []string{"GET /devices/{id}", "GET /devices/{site}/{name}"}},
	{"FleetService/QuarantineDevice", []string{"POST /devices/{id}/quarantine"}},
	{"FleetService/ReleaseDevice", []string{"POST /devices/{id}/release"}},
	{"FleetService/OfferDevice", []string{"POST /devices/{id}/offer"}},
	{"FleetService/GetCommand", []string{"GET /commands/{id}"}},
	{"FleetService/ListCommands", []string{"GET /commands", "GET /devices/{id}"}},
	{"FleetService/ListSites", []string{"GET /{$}", "GET /sites/{name}"}},
	{"FleetService/RetryCommand", []string{"POST /commands/{id}/retry"}},
	{"FleetService/WatchFleet", []string{"GET /events"}},
	{"OperationService/StartOperation", []string{"POST /operations", "POST /devices/{id}/action"}},
	{"OperationService/GetOperation", []string{"GET /operations/{id}"}},
	{"OperationService/ListOperations", []string{"GET /operations"}},
	{"OperationService/CancelOperation", []string{"POST /operations/{id}/cancel"}},
	{"OperationService/WatchOperation", []string{"GET /operations/{id}"}},
	{"PolicyService/GetEffectivePolicy", []string{"GET /policy", "GET /sites/{name}"}},
	{"PolicyService/ListPolicyDecisions", []string{"GET /policy", "GET /devices/{id}"}},
	{"PolicyService/ListPendingActions", []string{"GET /policy", "GET /sites/{name}"}},
	{"PolicyService/ApprovePendingActions", []string{"POST /policy/pending/{verb}"}},
	{"PolicyService/RejectPendingActions", []string{"POST /policy/pending/{verb}"}},
	{"PolicyService/ListSitePolicyStates", []string{"GET /policy"}},
	{"PolicyService/SetDeviceHold", []string{"POST /holds"}},
	{"PolicyService/ClearDeviceHold", []string{"POST /holds/clear"}},
	{"PolicyService/ReplayPolicy", []string{"GET /policy/replay", "POST /policy/replay"}},
	{"BulkService/PreviewBulkImpairment", []string{"POST /devices/bulk/preview", "POST /operations"}},
	{"BulkService/BulkQuarantine", []string{"POST /devices/bulk"}},
	{"BulkService/BulkRelease", []string{"POST /devices/bulk"}},
	{"RemediationService/GetDeviceRemediation", []string{"GET /devices/{id}"}},
	{"RemediationService/ListHandoffs", []string{"GET /handoffs"}},
	{"RemediationService/CloseHandoff", []string{"POST /handoffs/{id}/close"}},
	{"HardwareService/GetFleetDrift", []string{"GET /drift"}},
	{"HardwareService/ListHardwareHistory", []string{"GET /hardware"}},
	{"HardwareService/ListValidationRuns", []string{"GET /validation"}},
}

// InventoryMarkdown renders Inventory as the Markdown table of
// docs/reference/web.md ("Every RPC, the page that reaches it").
func InventoryMarkdown() string {
	var b strings.Builder
	b.WriteString("| RPC | fleet view |\n|---|---|\n")
	for _, e := range Inventory {
		rs := make([]string, len(e.Routes))
		for i, r := range e.Routes {
			rs[i] = "`" + strings.Replace(r, "{$}", "", 1) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", e.RPC, strings.Join(rs, ", "))
	}
	return b.String()
}
