package store

import "fmt"

// SiteScope names a set of sites by name: every site but Sites when
// Except is true, else exactly Sites (none when empty). The policy
// evaluator reads candidates only of the sites whose policy is enabled,
// so that a hub whose policy is off everywhere (the default) does no
// policy reads at all (issue 26; docs/design/performance.md "Quarantine
// under ingest, fourth step").
type SiteScope struct {
	Except bool
	Sites  []string
}

// None reports whether the scope names no site.
func (sc SiteScope) None() bool { return !sc.Except && len(sc.Sites) == 0 }

// cond returns the SQL condition "column col is in the scope" with the
// scope's sites as placeholder $n (pass sc.arg()).
func (sc SiteScope) cond(col string, n int) string {
	if sc.Except {
		return fmt.Sprintf("%s <> ALL($%d::text[])", col, n)
	}
	return fmt.Sprintf("%s = ANY($%d::text[])", col, n)
}

// arg is the scope's sites as a query argument: never nil (a nil slice
// is NULL, and "<> ALL(NULL)" holds for no row).
func (sc SiteScope) arg() []string {
	if sc.Sites == nil {
		return []string{}
	}
	return sc.Sites
}
