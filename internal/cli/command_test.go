package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// validate's body: -h passes through, a parse error is reported alone, a
// parsed command line gets check's and the logger's problems, and a clean
// one prints the ok line.
func TestCheckConfigReportsEveryProblemOrTheOKLine(t *testing.T) {
	good := LogOptions{Level: "info", Format: "text"}
	checked := false
	check := func() (string, error) { checked = true; return "all good", errors.New("roster: missing") }
	for _, tc := range []struct {
		name     string
		parseErr error
		lf       LogOptions
		check    func() (string, error)
		want     error
		stdout   string
		stderr   []string
	}{
		{"help", flag.ErrHelp, good, check, flag.ErrHelp, "", nil},
		{"parse error", errors.Join(errors.New("IRONLINK_X: bad"), errors.New("IRONLINK_Y: bad")), good, check, ErrInvalid, "", []string{"invalid: IRONLINK_X: bad", "invalid: IRONLINK_Y: bad"}},
		{"check and logger", nil, LogOptions{Level: "loud", Format: "text"}, check, ErrInvalid, "", []string{"invalid: roster: missing", `invalid: log level "loud"`}},
		{"ok", nil, good, func() (string, error) { return "all good", nil }, nil, "all good\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked = false
			var out, errw bytes.Buffer
			err := CheckConfig(&out, &errw, tc.parseErr, tc.lf, tc.check)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("CheckConfig = %v, want %v", err, tc.want)
			}
			if out.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tc.stdout)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errw.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errw.String())
				}
			}
			if tc.parseErr != nil && checked {
				t.Error("check ran although the command line did not parse")
			}
		})
	}
}
