package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DeviceRef identifies a device found by name.
type DeviceRef struct {
	// ID is the Ironic node UUID (canonical form).
	ID string
	// Site is the device's site.
	Site string
	// Name is the Ironic node name.
	Name string
	// Removed is true when the node vanished from Ironic.
	Removed bool
	// ProvisionState is the node's provision_state as last reported ("":
	// not reported yet).
	ProvisionState string
}

// DevicesByName returns the devices called name (exact, case-sensitive),
// within site when site is non-empty, in (site, id) order. Live devices are
// preferred: removed ones are returned only when no live device has the name
// (Ironic may give a new node the name of a deleted one). At most 50 are
// returned; an empty result (no error) means no device has the name. Served
// by the devices_name index (migration 00007).
func (s *Store) DevicesByName(ctx context.Context, name, site string) ([]DeviceRef, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, d.removed, coalesce(d.facts->>'provision_state', '') FROM devices d
		WHERE d.name = $1 AND ($2 = '' OR d.site = $2)
		ORDER BY d.removed, d.site, d.id LIMIT 51`, name, site)
	if err != nil {
		return nil, fmt.Errorf("devices named %q: %w", name, err)
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceRef, error) {
		var d DeviceRef
		err := r.Scan(&d.ID, &d.Site, &d.Name, &d.Removed, &d.ProvisionState)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("devices named %q: %w", name, err)
	}
	live := 0
	for live < len(refs) && !refs[live].Removed {
		live++
	}
	if live > 0 {
		refs = refs[:live]
	}
	if len(refs) > 50 {
		refs = refs[:50]
	}
	return refs, nil
}

// NameCandidates returns up to limit distinct device names (within site when
// non-empty, removed devices included) that could be what an operator meant
// by name: names starting with the first half of name (by runes, at least
// one), and names equal to it but for case. The caller ranks them (for a
// "did you mean" hint); the order is by name.
func (s *Store) NameCandidates(ctx context.Context, name, site string, limit int) ([]string, error) {
	r := []rune(name)
	half := string(r[:max(1, len(r)/2)])
	rows, err := s.pool.Query(ctx, `
		(SELECT DISTINCT d.name FROM devices d
		 WHERE d.name LIKE $1 AND d.name <> '' AND ($2 = '' OR d.site = $2) ORDER BY d.name LIMIT $3)
		UNION
		(SELECT DISTINCT d.name FROM devices d
		 WHERE lower(d.name) = lower($4) AND ($2 = '' OR d.site = $2) LIMIT 10)
		ORDER BY 1`, LikePrefix(half), site, limit, name)
	if err != nil {
		return nil, fmt.Errorf("names like %q: %w", name, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("names like %q: %w", name, err)
	}
	return names, nil
}

// escapeLike quotes the LIKE metacharacters of s (%, _ and the escape
// character backslash).
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// LikePrefix returns the LIKE pattern matching strings that start with p.
func LikePrefix(p string) string { return escapeLike(p) + "%" }

// ErrBadPattern is returned (wrapped) by GlobToLike for a pattern ending in
// a lone backslash.
var ErrBadPattern = errors.New("bad name pattern")

// GlobToLike turns a shell-style pattern ("*" any run, "?" one character,
// backslash quotes the next character) into a LIKE pattern with backslash as
// the escape character. Errors: ErrBadPattern for a trailing backslash.
func GlobToLike(glob string) (string, error) {
	var b strings.Builder
	esc := false
	for _, c := range glob {
		switch {
		case esc:
			b.WriteString(escapeLike(string(c)))
			esc = false
		case c == '\\':
			esc = true
		case c == '*':
			b.WriteByte('%')
		case c == '?':
			b.WriteByte('_')
		default:
			b.WriteString(escapeLike(string(c)))
		}
	}
	if esc {
		return "", fmt.Errorf("%w %q: it ends with a lone backslash", ErrBadPattern, glob)
	}
	return b.String(), nil
}
