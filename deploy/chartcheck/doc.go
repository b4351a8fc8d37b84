// Package chartcheck holds the tests of the hub's Helm chart
// (deploy/charts/hub): it renders the chart with helm for the default values
// and for ci/all-on-values.yaml, decodes every object strictly against the
// Kubernetes and Prometheus Operator API types (an unknown or duplicated
// field fails), and checks what the chart promises: the restricted Pod
// Security level, probes on the admin port, migrations in a hook Job with the
// serving pods started with --migrate=false, the image tag defaulting to the
// chart's appVersion, a roster the hub accepts, alert rules and a dashboard
// that name only metrics the hub exports, and a values schema that refuses a
// malformed roster. It has no non-test code.
package chartcheck
