// Package cli tests the `ironlink` operator CLI against a real hub process,
// a real PostgreSQL and a real satellite polling the built-in OpenStack
// simulator: golden tables, JSON/YAML round-trips into the API's messages,
// --wait on success, failure and timeout, --watch, and bad input with its
// exit codes. Run with -update to rewrite the golden files in testdata/.
package cli
