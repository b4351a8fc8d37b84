// Package health decides whether a hub replica is ready and says so on
// every channel that asks: /healthz and /readyz on the admin HTTP listener
// (for Kubernetes probes and load balancers) and the gRPC health service
// (grpc.health.v1, for gRPC-aware balancers and grpcurl).
//
// A replica is ready when PostgreSQL answers within a short timeout, the
// schema carries every migration this binary embeds, and the replica is
// not draining. The Checker re-evaluates that every second or two and moves
// the gRPC health status with it, so a replica whose database is gone turns
// NOT_SERVING within seconds and SERVING again once it answers.
//
// The admin listener (Serve) also serves /metrics from a Prometheus
// registry. It is plaintext: bind it to loopback or the pod network only.
//
// It imports hub/store only for the Pinger it checks; nothing in hub imports
// it but hub/app.
package health
