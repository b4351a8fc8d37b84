// Command ironlink-openstacksim serves a simulated OpenStack site (Keystone,
// Ironic, Placement and Nova on one loopback listener) seeded like the test
// bed, for `make demo` and manual poking.
//
// Usage:
//
//	ironlink-openstacksim [--listen 127.0.0.1:0] [--nodes 50] [--churn 10s]
//	    [--clouds-yaml PATH] [--cloud sim] [--token-ttl 1h] [--no-placement]
//	    [--no-nova] [--nova-non-admin] [--orphans-ironic N] [--orphans-nova N]
//	    [--control-socket PATH] [--hardware]
//	ironlink-openstacksim health --socket PATH [--fault xid79] [--healthy] NODE...
//	ironlink-openstacksim health --list
//
// The health subcommand is a health-checker simulator (internal/healthsim):
// it sends NVSentinel-shaped events for the named nodes through a
// satellite's local health door (--health-socket) and prints one line per
// event once the hub committed them.
//
// With --control-socket, POST /faults on that Unix socket injects a fault
// in front of the simulated services (JSON: service, method, pathContains,
// status, times; see openstacksim.Fault) and DELETE /faults clears them.
//
// Once listening it prints exactly one line on stdout,
// OPENSTACK_SIM_URL=http://127.0.0.1:PORT, and logs everything else (slog,
// text) on stderr. It stops on SIGINT or SIGTERM.
package main
