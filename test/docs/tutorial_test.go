package docs

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// step is one command of the tutorial and the output it documents.
type step struct {
	line    int      // 1-based line of the command in the tutorial
	command string   // without the "$ " prompt
	want    []string // documented output lines
}

// tutorialSteps extracts the commands of a markdown file's ```console
// blocks: a line "$ CMD" is a command (a trailing backslash continues it
// on the next line), the lines up to the next command its output.
func tutorialSteps(lines []string) []step {
	var steps []step
	inConsole := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			inConsole = !inConsole && trimmed == "```console"
			continue
		}
		if !inConsole {
			continue
		}
		if strings.HasPrefix(l, "$ ") {
			s := step{line: i + 1, command: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(s.command, "\\") && i+1 < len(lines) {
				i++
				s.command = strings.TrimSuffix(s.command, "\\") + "\n" + lines[i]
			}
			steps = append(steps, s)
			continue
		}
		if len(steps) > 0 && trimmed != "" {
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
		}
	}
	return steps
}

// linePattern turns a documented output line into a pattern over the
// actual line: runs of blanks match any run of blanks (table columns
// move with their contents), "…" matches anything, the rest literally.
func linePattern(doc string) *regexp.Regexp {
	parts := strings.Split(strings.Join(strings.Fields(doc), " "), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// matchOutput reports the first documented line that has no match among
// the actual lines, in order ("…" alone stands for any lines).
func matchOutput(want []string, got string) (missing string, ok bool) {
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	at := 0
	for _, w := range want {
		if strings.TrimSpace(w) == "…" {
			continue
		}
		re := linePattern(w)
		found := false
		for at < len(lines) {
			at++
			if re.MatchString(lines[at-1]) {
				found = true
				break
			}
		}
		if !found {
			return w, false
		}
	}
	return "", true
}

func TestTutorialOutputMatching(t *testing.T) {
	got := "NAME  LINK       DEVICES\ndemo  CONNECTED  51\nother line\n"
	for _, c := range []struct {
		name string
		want []string
		ok   bool
	}{
		{"exact, other blanks", []string{"NAME LINK DEVICES", "demo CONNECTED 51"}, true},
		{"ellipsis", []string{"demo  CONNECTED  …"}, true},
		{"lines skipped", []string{"NAME  …", "other line"}, true},
		{"order kept", []string{"demo  CONNECTED  …", "NAME  …"}, false},
		{"changed output", []string{"demo  DISCONNECTED  …"}, false},
		{"partial line is not enough", []string{"demo"}, false},
	} {
		if _, ok := matchOutput(c.want, got); ok != c.ok {
			t.Errorf("%s: matchOutput(%q) = %v, want %v", c.name, c.want, ok, c.ok)
		}
	}
	steps := tutorialSteps(strings.Split("```sh\nmake demo\n```\n```console\n$ a \\\n  b\nout 1\n\n$ c\n```\n$ not a command\n", "\n"))
	if len(steps) != 2 || steps[0].command != "a \n  b" || len(steps[0].want) != 1 || steps[1].command != "c" {
		t.Errorf("tutorialSteps = %+v", steps)
	}
}

// Every command of docs/tutorial.md runs, in order and in one shell,
// against a demo started by scripts/demo.sh as `make demo` starts it
// (simulator, hub, satellite, the fleet view's proxy; PostgreSQL from
// pgtest; see startDemo), and prints what the tutorial shows.
func TestTutorialCommandsRunAgainstTheDemo(t *testing.T) {
	t.Parallel()
	lines, err := readLines("docs/tutorial.md")
	if err != nil {
		t.Fatal(err)
	}
	steps := tutorialSteps(lines)
	if len(steps) < 10 {
		t.Fatalf("docs/tutorial.md has only %d commands in ```console blocks", len(steps))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "```sh\nmake demo\n```") {
		t.Fatal("docs/tutorial.md no longer starts the demo with `make demo`: this test runs scripts/demo.sh in its place")
	}

	d := startDemo(t, true, "DATABASE_URL="+pgtest.NewDatabase(t))
	root, env := d.root, d.env

	// One shell runs every command in order (variables and exports carry
	// over, as in the reader's terminal); a marker after each one carries
	// its exit status.
	const marker = "@@ironlink-docs-step"
	var script strings.Builder
	script.WriteString("exec 2>&1\n")
	for i, s := range steps {
		fmt.Fprintf(&script, "%s\n__ironlink_status=$?; echo; echo \"%s %d $__ironlink_status\"\n", s.command, marker, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "--noprofile", "--norc")
	sh.Dir, sh.Env = root, env
	sh.Stdin = strings.NewReader(script.String())
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	runErr := sh.Run()

	outputs := strings.Split(out.String(), marker+" ")
	for i, s := range steps {
		if i+1 >= len(outputs) {
			t.Fatalf("docs/tutorial.md:%d: `%s` did not finish (shell: %v); output so far:\n%s", s.line, s.command, runErr, harness.Tail(out.String(), 40))
		}
		got := outputs[i]
		if i > 0 { // drop the previous marker's "N status" line
			_, got, _ = strings.Cut(got, "\n")
		}
		var n, status int
		if _, err := fmt.Sscanf(outputs[i+1], "%d %d", &n, &status); err != nil || n != i {
			t.Fatalf("docs/tutorial.md:%d: cannot read the exit status of `%s`", s.line, s.command)
		}
		if status != 0 {
			t.Errorf("docs/tutorial.md:%d: `%s` exited %d:\n%s", s.line, s.command, status, got)
			continue
		}
		if missing, ok := matchOutput(s.want, got); !ok {
			t.Errorf("docs/tutorial.md:%d: `%s` printed no line like\n\t%s\n(in the documented order); it printed:\n%s", s.line, s.command, missing, got)
		}
	}
}
