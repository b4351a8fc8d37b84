package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/metrics"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
)

// hubPolicy is the quarantine policy's part of a replica: the file
// watcher, the evaluator (leading on one replica at a time) and the API.
type hubPolicy struct {
	watcher *policy.Watcher
	eval    *policyrun.Evaluator
	// st wakes eval on store.PolicyNotifyChannel.
	st *store.Store
	// wake: eval is woken (not --policy-poll-only).
	wake bool
	api  *policyapi.Server
	// rem serves RemediationService; webhook delivers repair handoffs
	// (nil without --handoff-webhook-url).
	rem     *remediation.API
	webhook *remediation.WebhookSender
}

// newPolicy loads --policy-file (an invalid file fails the start; none
// means automatic quarantine off everywhere) and builds the evaluator and
// PolicyService, with their metrics.
func newPolicy(cfg Config, st *store.Store, obs *observability, templates func() *novatemplate.File, log *slog.Logger) (*hubPolicy, error) {
	plog := log.With("component", "policy")
	w := policy.Static(policy.Disabled())
	if cfg.PolicyFile != "" {
		var err error
		warn := func(f *policy.File) {
			for _, msg := range f.Warnings(cfg.StaleAfter, time.Now()) {
				plog.Warn("policy: "+msg, "path", cfg.PolicyFile)
			}
		}
		if w, err = policy.NewWatcher(cfg.PolicyFile, 0, plog, warn); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		warn(w.Policy())
	} else {
		plog.Info("no --policy-file: automatic quarantine is off")
	}
	api := policyapi.NewServer(st, w, actorFromContext, plog)
	api.SetReplayDB(st.Pool())
	hooks := obs.metrics.WatchPolicy(func(ctx context.Context) ([]metrics.PolicySiteState, error) {
		states, err := api.SiteStates(ctx, "")
		if err != nil {
			return nil, err
		}
		return metrics.PolicyStates(states), nil
	}, plog)
	rlog := log.With("component", "remediation")
	// A ladder step passes the operator's checks (hub/operations' guards
	// and precondition table) before its operation is created.
	checks := operations.NewServer(st, operations.Config{NovaTemplates: templates}, rlog)
	engine := remediation.New(st, remediation.Config{Webhook: cfg.Handoff.URL != "", Abortable: operations.Abortable, NovaTemplates: templates,
		Check: checks.CheckStep}, rlog)
	eval := policyrun.New(st, policyrun.Config{Interval: cfg.PolicyInterval, Coalesce: cfg.PolicyCoalesce, Replica: cfg.Replica, Policy: w.Policy, Hooks: hooks,
		FreshFor: cfg.StaleAfter, Remediate: func(ctx context.Context, f *policy.File) error {
			_, err := engine.Tick(ctx, f)
			return err
		}}, plog)
	hp := &hubPolicy{watcher: w, eval: eval, st: st, wake: !cfg.PolicyPollOnly, api: api, rem: remediation.NewAPI(st, w.Policy, actorFromContext, rlog)}
	if cfg.Handoff.URL != "" {
		secret, err := cfg.Handoff.Secret()
		if err != nil {
			return nil, err
		}
		hp.webhook = remediation.NewWebhookSender(st, remediation.WebhookConfig{URL: cfg.Handoff.URL, Secret: secret,
			Timeout: cfg.Handoff.Timeout}, rlog)
	}
	return hp, nil
}

// register serves PolicyService and RemediationService on srv and marks
// them SERVING.
func (p *hubPolicy) register(srv *grpc.Server, hs *health.Server) {
	ironlinkv1.RegisterPolicyServiceServer(srv, p.api)
	hs.SetServingStatus(ironlinkv1.PolicyService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	ironlinkv1.RegisterRemediationServiceServer(srv, p.rem)
	hs.SetServingStatus(ironlinkv1.RemediationService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
}

// run watches the file and runs the evaluator, woken by every
// notification on store.PolicyNotifyChannel unless --policy-poll-only,
// until ctx ends.
func (p *hubPolicy) run(ctx context.Context) error {
	if p.wake {
		stop := p.st.Notifications().Subscribe(store.PolicyNotifyChannel, func(string) { p.eval.Wake() })
		defer stop()
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.watcher.Run(ctx) }()
	if p.webhook != nil {
		go p.webhook.Run(ctx)
	}
	err := p.eval.Run(ctx)
	<-done
	return err
}
