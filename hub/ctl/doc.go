// Package ctl is the `ironlink` command-line tool for operators: contexts in
// a kubeconfig-like file, `get sites|devices|commands` as aligned tables (or
// JSON, YAML, names), `describe device|site`, and `quarantine`/`release`
// with `--wait`. Every call mints a fresh short-lived client assertion from
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
