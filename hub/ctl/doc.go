// Package ctl is the `ironlink` command-line tool for operators: contexts in
// a kubeconfig-like file, `get sites|devices|commands|operations|decisions|
// pending` as aligned tables (or JSON, YAML, names), `describe device|site`,
// `quarantine`/`release`/`offer`/`retry` with `--wait`, `op` (lifecycle
// operations), `holds`, `policy`, `watch` and `events` (the change feed).
// Operation and command ids are taken by unique prefix (idprefix.go);
// Inventory maps every RPC of the operator services to the commands that
// reach it, and a test keeps it complete. Every call mints a fresh short-lived client assertion from
// the context's private key, so users never handle tokens.
//
// Layering rule: this package talks to the hub only through its public gRPC
// API — the generated clients in gen/ironlink/v1 — and may use internal/
// (internal/auth to sign assertions, internal/tlsutil for TLS). It must never
// import hub/store, hub/fleet, hub/link, hub/app or any other hub package, nor
// satellite/: what the CLI can do, any other API client can do too. A test
// (TestImportsOnlyPublicAPI) fails when an import breaks the rule.
//
// Exit codes (ExitOK … ExitWaitTimeout) are part of the interface; they are
// listed in `ironlink --help` and docs/reference/cli.md.
package ctl
