package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrInvalid is what a `validate` subcommand returns after ReportProblems
// printed what is wrong (the binaries exit 1 on it).
var ErrInvalid = errors.New("configuration invalid")

// Problems flattens err into one message per problem: an errors.Join tree
// (recursively) gives one message per joined error, while an error that
// wraps several with fmt.Errorf's %w keeps its own message. nil gives none.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var msgs []string
		for _, e := range j.Unwrap() {
			msgs = append(msgs, e.Error())
		}
		if strings.Join(msgs, "\n") == err.Error() { // errors.Join's message
			var out []string
			for _, e := range j.Unwrap() {
				out = append(out, Problems(e)...)
			}
			return out
		}
	}
	return []string{err.Error()}
}

// ReportProblems writes one "invalid: …" line per problem to w (a problem's
// further lines indented) and returns ErrInvalid, or returns nil when there
// are none.
func ReportProblems(w io.Writer, problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	for _, p := range problems {
		fmt.Fprintln(w, "invalid:", strings.ReplaceAll(p, "\n", "\n  "))
	}
	return ErrInvalid
}
