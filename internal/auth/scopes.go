package auth

import (
	"slices"
	"strings"
)

// Scopes a client may hold (roster "scopes"). Each RPC needs exactly one of
// them (MethodScopes); a client holds any number. The names follow the OAuth
// 2.0 "scope" token syntax of RFC 6749 §3.3.
const (
	// ScopeDeviceUpdate lets a satellite change devices of its own site
	// (command results, trait drift).
	ScopeDeviceUpdate = "device:update"
	// ScopeDeviceConditionCreate lets a satellite report device conditions
	// of its own site over LinkService/Connect.
	ScopeDeviceConditionCreate = "device-condition:create"
	// ScopeDeviceHealthCreate lets a health checker (GPU monitor, BMC log
	// scraper, burn-in suite) report health events for devices of its own
	// site over HealthService/ReportHealth (docs/reference/health.md).
	ScopeDeviceHealthCreate = "device-health:create"
	// ScopeOperationsRead lets an operator read devices, commands and sites.
	ScopeOperationsRead = "operations:read"
	// ScopeOperationsWrite lets an operator quarantine and release devices.
	ScopeOperationsWrite = "operations:write"
)

// AllScopes lists every scope the roster accepts, in a stable order.
var AllScopes = []string{ScopeDeviceUpdate, ScopeDeviceConditionCreate, ScopeDeviceHealthCreate, ScopeOperationsRead, ScopeOperationsWrite}

// SiteScopes are the scopes that act on one site's devices; only clients
// with a site (satellites, health checkers) may hold them, since the hub
// binds them to the client's site.
var SiteScopes = []string{ScopeDeviceUpdate, ScopeDeviceConditionCreate, ScopeDeviceHealthCreate}

// ValidScope reports whether s is one of AllScopes.
func ValidScope(s string) bool { return slices.Contains(AllScopes, s) }

// MethodScopes is authorization as data: every full gRPC method name of the
// ironlink.v1 services ("/package.Service/Method", as in grpc.Method and
// grpc.UnaryServerInfo.FullMethod) mapped to the one scope a caller must hold
// to call it. A method missing here is refused (PermissionDenied) even for an
// authenticated caller; a test walks the generated service descriptors and
// fails on any method without an entry, and on any entry naming no method.
//
// Treat it as read-only.
var MethodScopes = map[string]string{
	// The satellite's link: hello, condition batches, site conditions,
	// command results.
	"/ironlink.v1.LinkService/Connect": ScopeDeviceConditionCreate,

	// Health checkers (hub/healthapi): events for devices of their site.
	"/ironlink.v1.HealthService/ReportHealth": ScopeDeviceHealthCreate,
	// Validation checkers (hub/validation): results for runs of their site.
	"/ironlink.v1.ValidationService/RecordValidationResult": ScopeDeviceHealthCreate,
	// Hardware truth (hub/fleet/drift.go): drift, history, validation runs.
	"/ironlink.v1.HardwareService/GetFleetDrift":       ScopeOperationsRead,
	"/ironlink.v1.HardwareService/ListHardwareHistory": ScopeOperationsRead,
	"/ironlink.v1.HardwareService/ListValidationRuns":  ScopeOperationsRead,

	"/ironlink.v1.FleetService/ListDevices":  ScopeOperationsRead,
	"/ironlink.v1.FleetService/GetDevice":    ScopeOperationsRead,
	"/ironlink.v1.FleetService/GetCommand":   ScopeOperationsRead,
	"/ironlink.v1.FleetService/ListCommands": ScopeOperationsRead,
	"/ironlink.v1.FleetService/ListSites":    ScopeOperationsRead,
	"/ironlink.v1.FleetService/WatchFleet":   ScopeOperationsRead,

	"/ironlink.v1.FleetService/QuarantineDevice": ScopeOperationsWrite,
	"/ironlink.v1.FleetService/ReleaseDevice":    ScopeOperationsWrite,
	"/ironlink.v1.FleetService/OfferDevice":      ScopeOperationsWrite,
	"/ironlink.v1.FleetService/RetryCommand":     ScopeOperationsWrite,

	// Operations (hub/operations): the node lifecycle at a site.
	"/ironlink.v1.OperationService/GetOperation":   ScopeOperationsRead,
	"/ironlink.v1.OperationService/ListOperations": ScopeOperationsRead,
	"/ironlink.v1.OperationService/WatchOperation": ScopeOperationsRead,

	"/ironlink.v1.OperationService/StartOperation":  ScopeOperationsWrite,
	"/ironlink.v1.OperationService/CancelOperation": ScopeOperationsWrite,
	// The quarantine policy (hub/policyapi).
	"/ironlink.v1.PolicyService/GetEffectivePolicy":    ScopeOperationsRead,
	"/ironlink.v1.PolicyService/ListPolicyDecisions":   ScopeOperationsRead,
	"/ironlink.v1.PolicyService/ListPendingActions":    ScopeOperationsRead,
	"/ironlink.v1.PolicyService/ListSitePolicyStates":  ScopeOperationsRead,
	"/ironlink.v1.PolicyService/ReplayPolicy":          ScopeOperationsRead,
	"/ironlink.v1.PolicyService/ApprovePendingActions": ScopeOperationsWrite,
	"/ironlink.v1.PolicyService/RejectPendingActions":  ScopeOperationsWrite,
	"/ironlink.v1.PolicyService/SetDeviceHold":         ScopeOperationsWrite,
	"/ironlink.v1.PolicyService/ClearDeviceHold":       ScopeOperationsWrite,
	// Remediation ladders and repair handoffs (hub/remediation).
	"/ironlink.v1.RemediationService/GetDeviceRemediation": ScopeOperationsRead,
	"/ironlink.v1.RemediationService/ListHandoffs":         ScopeOperationsRead,
	"/ironlink.v1.RemediationService/CloseHandoff":         ScopeOperationsWrite,
	// Bulk quarantine/release by selector: the preview only reads.
	"/ironlink.v1.BulkService/PreviewBulkImpairment": ScopeOperationsRead,
	"/ironlink.v1.BulkService/BulkQuarantine":        ScopeOperationsWrite,
	"/ironlink.v1.BulkService/BulkRelease":           ScopeOperationsWrite,
}

// PublicServices are the fully qualified gRPC service names served without
// authentication — the documented exceptions to MethodScopes:
//
//   - grpc.health.v1.Health: load balancers and Kubernetes probes carry no
//     credentials; the answer (SERVING or not) reveals nothing about the fleet.
//   - grpc.reflection.v1.ServerReflection and its v1alpha predecessor: the
//     schema is public (it is in the repository) and grpcurl needs it to build
//     requests; every real call still needs a token.
var PublicServices = []string{
	"grpc.health.v1.Health",
	"grpc.reflection.v1.ServerReflection",
	"grpc.reflection.v1alpha.ServerReflection",
}

// IsPublicMethod reports whether fullMethod ("/package.Service/Method")
// belongs to one of PublicServices.
func IsPublicMethod(fullMethod string) bool {
	svc, _, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return ok && slices.Contains(PublicServices, svc)
}

// RequiredScope returns the scope fullMethod needs and whether the method is
// in MethodScopes at all.
func RequiredScope(fullMethod string) (string, bool) {
	s, ok := MethodScopes[fullMethod]
	return s, ok
}
