// Package healthapi is ironlink.v1.HealthService: health events from
// checkers on or near the machines (GPU monitors, BMC log scrapers, burn-in
// suites), validated, authorized against the caller's roster site
// (hub/authn: a checker bound to site A reporting for site B is refused
// with PermissionDenied) and committed by hub/store's ReportHealth, which
// turns each (component class, check) of a device into a health condition
// (docs/reference/health.md, docs/reference/conditions.md "Health
// conditions"). Refusals are built by hub/grpcerr.
package healthapi
