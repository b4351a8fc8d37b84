package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// A flag starts from its environment variable when set and non-empty,
// else from its default; the command line wins over both; environment
// values that do not parse are all reported after the command line parsed.
func TestFlagsEnvironmentFallback(t *testing.T) {
	type values struct {
		s string
		i int
		f float64
		d time.Duration
		b bool
	}
	define := func(fs *flag.FlagSet) (*Flags, *values) {
		f := NewFlags(fs)
		v := &values{}
		f.String(&v.s, "name", "CLI_TEST_NAME", "def", "a name")
		f.Int(&v.i, "count", "CLI_TEST_COUNT", 3, "a count")
		f.Float64(&v.f, "rate", "CLI_TEST_RATE", 1.5, "a rate")
		f.Duration(&v.d, "wait", "CLI_TEST_WAIT", time.Second, "a wait")
		f.Bool(&v.b, "on", false, "a switch")
		return f, v
	}
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    values
		wantErr []string
	}{
		{name: "defaults", want: values{"def", 3, 1.5, time.Second, false}},
		{name: "environment", env: map[string]string{"CLI_TEST_NAME": "env", "CLI_TEST_COUNT": "7", "CLI_TEST_RATE": "0.5", "CLI_TEST_WAIT": "1m"},
			want: values{"env", 7, 0.5, time.Minute, false}},
		{name: "empty environment value is unset", env: map[string]string{"CLI_TEST_NAME": ""}, want: values{"def", 3, 1.5, time.Second, false}},
		{name: "flag wins", env: map[string]string{"CLI_TEST_NAME": "env", "CLI_TEST_WAIT": "1m"}, args: []string{"--name", "flag", "--wait", "2s", "--on"},
			want: values{"flag", 3, 1.5, 2 * time.Second, true}},
		{name: "malformed environment values, all named", env: map[string]string{"CLI_TEST_COUNT": "many", "CLI_TEST_WAIT": "soon"},
			want: values{"def", 3, 1.5, time.Second, false}, wantErr: []string{`CLI_TEST_COUNT="many"`, `CLI_TEST_WAIT="soon"`}},
		{name: "positional arguments", args: []string{"extra"}, want: values{"def", 3, 1.5, time.Second, false}, wantErr: []string{"unexpected arguments [extra]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"CLI_TEST_NAME", "CLI_TEST_COUNT", "CLI_TEST_RATE", "CLI_TEST_WAIT"} {
				t.Setenv(k, tc.env[k])
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			f, v := define(fs)
			err := f.Parse(tc.args)
			if *v != tc.want {
				t.Errorf("values %+v, want %+v", *v, tc.want)
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("error %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
}

// -h lists every flag once, under its group, with its environment variable
// and its default.
func TestFlagsUsageListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&out)
	f := NewFlags(fs)
	var s, s2 string
	var d time.Duration
	var b bool
	f.String(&s, "first", "CLI_TEST_FIRST", "one", "before any group")
	f.Group("timing")
	f.Duration(&d, "wait", "CLI_TEST_WAIT", 3*time.Second, "a wait")
	f.Group("switches")
	f.Bool(&b, "on", false, "a switch")
	f.String(&s2, "named", "CLI_TEST_NAMED", "", "names its variable itself (env CLI_TEST_NAMED; required)")
	fs.Usage = f.Usage("test [flags]")
	if err := f.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	got := out.String()
	for _, w := range []string{
		"usage: test [flags]\n",
		"  -first string\n    \tbefore any group (env CLI_TEST_FIRST) (default \"one\")\n\ntiming:\n",
		"timing:\n  -wait duration\n    \ta wait (env CLI_TEST_WAIT) (default 3s)\n\nswitches:\n",
		"  -on\n    \ta switch\n",
		"(env CLI_TEST_NAMED; required)\n",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("usage lacks %q:\n%s", w, got)
		}
	}
	fs.VisitAll(func(fl *flag.Flag) {
		if n := strings.Count(got, "  -"+fl.Name+" ") + strings.Count(got, "  -"+fl.Name+"\n"); n != 1 {
			t.Errorf("-%s listed %d times", fl.Name, n)
		}
	})
	if strings.Count(got, "(env CLI_TEST_NAMED") != 1 {
		t.Errorf("the variable a usage names itself is added again:\n%s", got)
	}
}
