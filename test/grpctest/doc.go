// Package grpctest starts a hub replica in memory for tests, wired exactly as
// hub/app builds it for production: app.NewGRPCServer (keepalive, logging and
// panic-recovery interceptors) with app.AuthOptions (client authentication
// and authorization on, against a roster the test grows client by client)
// and app.RegisterServices (link, fleet, health, reflection), over a real
// store, on a bufconn listener. Every link stream goes through a
// linktest.Checker, so each test that uses it checks the link protocol too
// and fails on any violation at cleanup. (SPIRE's test/grpctest habit.)
//
// Test-only: production binaries must not import it.
package grpctest
