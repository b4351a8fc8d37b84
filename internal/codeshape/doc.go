// Package codeshape holds no product code: its tests measure the shape of
// the repository's product code (every non-test .go file outside gen/ and
// test/) and fail when a function grows over [MaxFuncLines], a file over
// [MaxFileLines] or a command's main.go over [MaxMainLines], unless the
// place is on the test's allowlist with a reason.
package codeshape

// Limits, in source lines (a function counts from its func line to its
// closing brace, both included; a file counts every line).
const (
	// MaxFuncLines is the longest a product function may be unless it is a
	// table (a composite literal listing cases, flags or routes).
	MaxFuncLines = 100
	// MaxFileLines is the longest a product file may be.
	MaxFileLines = 600
	// MaxMainLines is the longest a command's main.go may be: a main only
	// wires things together (SPIRE's thin mains).
	MaxMainLines = 60
)
