package store

import (
	"context"
	"time"

	"github.com/ironlink/ironlink/hub/store/notify"
	"github.com/ironlink/ironlink/internal/condition"
)

// The Store's methods by purpose. Callers depend on the roles they use
// (or on an interface of their own naming the methods they call), never on
// *Store where a role will do; each method is documented on *Store.

// Ingest is the link's write path (link.go, pipeline.go, group*.go,
// siteconditions.go, liveness.go, desired.go): a link's session, its
// condition batches and site-condition sets (group-committed, answered
// once committed), last-seen times and staleness.
type Ingest interface {
	OpenLink(ctx context.Context, h LinkHello) (LinkSession, error)
	CloseLink(ctx context.Context, site string, epoch int64) error
	SubmitBatch(ctx context.Context, site string, epoch int64, b Batch, after *Pending) *Pending
	SubmitSiteConditions(ctx context.Context, site string, epoch int64, conds []condition.Condition, after *Pending) *Pending
	FlushLastSeen(ctx context.Context, seen []LastSeen) (FlushResult, error)
	MarkStaleSites(ctx context.Context, staleAfter time.Duration) ([]string, error)
	ForeignDevice(ctx context.Context, site string, ids []string) (id, otherSite string, ok bool, err error)
}

// LinkCommands is the link's side of commands (commands_delivery.go,
// desired.go): which commands are due for a site, sent, their results,
// the desired states a satellite converges to and its drift corrections.
type LinkCommands interface {
	DueSites(ctx context.Context, p DeliveryPolicy) ([]string, error)
	DueCommands(ctx context.Context, site string, epoch int64, p DeliveryPolicy, resend bool, limit int) ([]Command, error)
	MarkSent(ctx context.Context, id string) error
	RecordResult(ctx context.Context, site string, r CommandResult) (ignored bool, err error)
	DesiredStates(ctx context.Context, site string) ([]DesiredState, error)
	RecordDriftCorrection(ctx context.Context, site, deviceID string, generation int64, detail string, at time.Time) (ignored bool, err error)
}

// LinkOperations is the link's side of operations
// (operations_delivery.go): which operations go out, sent, failed before a
// satellite took them, and the progress satellites report.
type LinkOperations interface {
	DueOperations(ctx context.Context, site string, epoch int64, p OperationDelivery, resend bool, limit int) (running, pending []Operation, free int, err error)
	MarkOperationSent(ctx context.Context, site string, epoch int64, id string) (Operation, bool, error)
	FailOperation(ctx context.Context, id, errText, failureReason string) error
	RecordOperationProgress(ctx context.Context, site string, p OperationProgress) (ProgressResult, error)
}

// Commands is the operator's side of commands (commands.go, holds.go,
// bulk.go, queries.go): quarantine, release and offer one device or many,
// their holds and release plans, retry, read.
type Commands interface {
	SetDesiredImpairment(ctx context.Context, deviceID string, desired Impairment, actor, reason, source string) (Command, error)
	RetryCommand(ctx context.Context, id, actor, reason, source string) (Command, error)
	MatchDevices(ctx context.Context, sel DeviceSelector, limit int) ([]BulkMatch, int, error)
	BulkSetDesiredImpairment(ctx context.Context, sel DeviceSelector, expected int, req BulkRequest) (BulkRequest, []Command, error)
	Quarantine(ctx context.Context, deviceID, holder string, a ImpairmentAction) (Command, error)
	Release(ctx context.Context, deviceID, holder string, all bool, a ImpairmentAction, validateOnly bool) (ReleasePlan, Command, error)
	PlanRelease(ctx context.Context, deviceID, holder string, all bool) (ReleasePlan, error)
	PlanBulkRelease(ctx context.Context, sel DeviceSelector, holder string, all bool) ([]ReleasePlan, error)
	Offer(ctx context.Context, deviceID string, a ImpairmentAction, validateOnly bool) (Command, error)
	Holds(ctx context.Context, ids []string) (map[string][]QuarantineHold, error)
	GetCommand(ctx context.Context, id string) (Command, error)
	ListCommands(ctx context.Context, f CommandFilter) ([]Command, bool, error)
}

// Operations is the operator's side of operations (operations.go): start,
// read, list and cancel them, and what a site's satellite can run.
type Operations interface {
	CreateOperations(ctx context.Context, ops []NewOperation) (string, []Operation, error)
	ActiveOperation(ctx context.Context, deviceID string) (Operation, bool, error)
	GetOperation(ctx context.Context, id string) (Operation, error)
	ListOperations(ctx context.Context, f OperationFilter) ([]Operation, error)
	CancelOperation(ctx context.Context, id, actor, reason string, abortable func(provisionState string) bool) (Operation, error)
	RecentOperations(ctx context.Context, deviceID string, limit int) ([]Operation, error)
	SiteCapabilities(ctx context.Context, site string) ([]string, error)
}

// Notifier gives the replica's one LISTEN dispatcher (notify): command
// wake-ups on NotifyChannel, operation changes on OperationsChannel and
// feed hints on FeedNotifyChannel.
type Notifier interface {
	Notifications() *notify.Dispatcher
}

// Policy is what the quarantine policy's evaluator reads and records
// (policy.go, policy_candidates.go): candidates, sites, policy
// quarantines, holds, decisions, the guard and pending actions' expiry.
type Policy interface {
	PolicyCandidates(ctx context.Context, scope SiteScope) ([]PolicyCandidate, error)
	PolicySites(ctx context.Context, since time.Time) ([]PolicySite, error)
	PolicyQuarantines(ctx context.Context) ([]PolicyQuarantine, error)
	DeviceHolds(ctx context.Context, ids []string) (map[string][]DeviceHold, error)
	RecordPolicyDecision(ctx context.Context, d PolicyDecision) (out PolicyDecision, recorded bool, err error)
	HealedTriggers(ctx context.Context, since time.Time, scope SiteScope) ([]HealedTrigger, error)
	ResolveAwaiting(ctx context.Context, id int64, d PolicyDecision) (out PendingAction, resolved bool, err error)
	RearmGuard(ctx context.Context, site string) (bool, error)
	ExpirePendingActions(ctx context.Context) (int, error)
}

// PolicyAdmin is the policy API's side (policy_api.go, policy.go):
// decisions and pending actions listed and resolved, holds set and
// cleared, and the sites' policy view.
type PolicyAdmin interface {
	PolicySites(ctx context.Context, since time.Time) ([]PolicySite, error)
	DeviceHolds(ctx context.Context, ids []string) (map[string][]DeviceHold, error)
	SetDeviceHold(ctx context.Context, h DeviceHold) (DeviceHold, error)
	ClearDeviceHold(ctx context.Context, deviceID, kind string) (cleared bool, err error)
	ListPolicyDecisions(ctx context.Context, f DecisionFilter) ([]PolicyDecision, bool, error)
	ListPendingActions(ctx context.Context, f PendingFilter) ([]PendingAction, bool, error)
	PendingSites(ctx context.Context, ids []int64) (map[int64]string, error)
	ResolvePendingActions(ctx context.Context, ids []int64, approve bool, actor, reason string) ([]PendingAction, error)
}

// Queries are the current-state reads (queries.go, names.go, exists.go,
// explain.go): sites, devices, their histories and status explanations.
type Queries interface {
	ListSites(ctx context.Context) ([]Site, error)
	SiteExists(ctx context.Context, name string) (bool, error)
	ListDevices(ctx context.Context, f DeviceFilter) ([]Device, bool, error)
	GetDevice(ctx context.Context, id string) (Device, error)
	DeviceExists(ctx context.Context, id string) (bool, error)
	DeviceSite(ctx context.Context, id string) (string, error)
	DevicesByName(ctx context.Context, name, site string) ([]DeviceRef, error)
	NameCandidates(ctx context.Context, name, site string, limit int) ([]string, error)
	StatusHistory(ctx context.Context, id string, limit int) ([]StatusChange, error)
	ImpairmentHistory(ctx context.Context, id string, limit int) ([]ImpairmentChange, error)
	StatusContexts(ctx context.Context, ids []string) (map[string]StatusContext, error)
	StatusContextOf(ctx context.Context, id string) (StatusContext, error)
}

// AsOf are the reads of a past instant (asof.go): a device and its
// histories as they stood at asOf.
type AsOf interface {
	GetDeviceAsOf(ctx context.Context, id string, asOf time.Time) (Device, error)
	StatusHistoryAsOf(ctx context.Context, id string, asOf time.Time, limit int) ([]StatusChange, error)
	ImpairmentHistoryAsOf(ctx context.Context, id string, asOf time.Time, limit int) ([]ImpairmentChange, error)
}

// Every role is a part of *Store.
var (
	_ Ingest         = (*Store)(nil)
	_ LinkCommands   = (*Store)(nil)
	_ LinkOperations = (*Store)(nil)
	_ Commands       = (*Store)(nil)
	_ Operations     = (*Store)(nil)
	_ Notifier       = (*Store)(nil)
	_ Policy         = (*Store)(nil)
	_ PolicyAdmin    = (*Store)(nil)
	_ Queries        = (*Store)(nil)
	_ AsOf           = (*Store)(nil)
)
