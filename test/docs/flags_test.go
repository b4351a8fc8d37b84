package docs

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/test/harness"
)

// helpText runs bin args... -h and returns what it printed (Go's flag
// package and cobra print help on stderr or stdout, and exit 0 or 2).
func helpText(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, _ := exec.Command(bin, append(args, "-h")...).CombinedOutput()
	if len(out) == 0 {
		t.Fatalf("%s %s -h printed nothing", filepath.Base(bin), strings.Join(args, " "))
	}
	return string(out)
}

// flagSet is what one command's -h lists: its flags (without dashes) and
// the environment variables it names.
type flagSet struct {
	flags, envs map[string]bool
}

var (
	goFlagLine    = regexp.MustCompile(`^  -([a-zA-Z0-9][a-zA-Z0-9-]*)`)
	goEnv         = regexp.MustCompile(`\benv ([A-Z][A-Z0-9_]+)`)
	cobraFlagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)
	cobraEnv      = regexp.MustCompile(`\$([A-Z][A-Z0-9_]+)`)
)

// goFlags parses the help of a program using Go's flag package.
func goFlags(help string) flagSet {
	fs := flagSet{map[string]bool{}, map[string]bool{}}
	for _, l := range strings.Split(help, "\n") {
		if m := goFlagLine.FindStringSubmatch(l); m != nil && m[1] != "h" && m[1] != "help" {
			fs.flags[m[1]] = true
		}
		if strings.HasPrefix(l, "    \t") || goFlagLine.MatchString(l) {
			for _, m := range goEnv.FindAllStringSubmatch(l, -1) {
				fs.envs[m[1]] = true
			}
		}
	}
	return fs
}

// cobraFlags parses a cobra command's help: its own "Flags:" section.
func cobraFlags(help string) (fs flagSet, subcommands []string) {
	fs = flagSet{map[string]bool{}, map[string]bool{}}
	section := ""
	for _, l := range strings.Split(help, "\n") {
		if l != "" && !strings.HasPrefix(l, " ") {
			section = strings.TrimSuffix(l, ":")
			continue
		}
		switch section {
		case "Flags":
			if m := cobraFlagLine.FindStringSubmatch(l); m != nil && m[1] != "help" {
				fs.flags[m[1]] = true
				for _, e := range cobraEnv.FindAllStringSubmatch(l, -1) {
					fs.envs[e[1]] = true
				}
			}
		case "Available Commands":
			if f := strings.Fields(l); len(f) > 0 && f[0] != "help" && f[0] != "completion" {
				subcommands = append(subcommands, f[0])
			}
		}
	}
	return fs, subcommands
}

// commandsFromHelp returns every command of the four binaries (by its
// doc heading name, e.g. "ironlink get devices", "ironlink-hub keygen")
// and what its -h lists.
func commandsFromHelp(t *testing.T, dir string) map[string]flagSet {
	t.Helper()
	cmds := map[string]flagSet{}
	hub := filepath.Join(dir, "ironlink-hub")
	help := helpText(t, hub)
	cmds["ironlink-hub serve"] = goFlags(help)
	m := regexp.MustCompile(`ironlink-hub ([a-z|-]+) \.\.\.`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("ironlink-hub -h names no subcommands:\n%s", help)
	}
	for _, sub := range strings.Split(m[1], "|") {
		if sub == "version" {
			continue
		}
		cmds["ironlink-hub "+sub] = goFlags(helpText(t, hub, sub))
	}
	sat := filepath.Join(dir, "ironlink-satellite")
	cmds["ironlink-satellite"] = goFlags(helpText(t, sat))
	cmds["ironlink-satellite validate"] = goFlags(helpText(t, sat, "validate"))
	cmds["ironlink-openstacksim"] = goFlags(helpText(t, filepath.Join(dir, "ironlink-openstacksim")))
	cmds["ironlink-lb"] = goFlags(helpText(t, filepath.Join(dir, "ironlink-lb")))
	cli := filepath.Join(dir, "ironlink")
	var walk func(path []string)
	walk = func(path []string) {
		fs, subs := cobraFlags(helpText(t, cli, path...))
		cmds[strings.TrimSpace("ironlink "+strings.Join(path, " "))] = fs
		for _, s := range subs {
			walk(append(slices.Clone(path), s))
		}
	}
	walk(nil)
	return cmds
}

// sameFlagsAs names commands documented by another command's section:
// validate takes exactly the flags of a run.
var sameFlagsAs = map[string]string{
	"ironlink-hub validate":       "ironlink-hub serve",
	"ironlink-satellite validate": "ironlink-satellite",
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	docFlag    = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)
	docEnv     = regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)
)

// commandsFromDocs reads docs/reference/*.md: each heading whose first
// code span names a command (it starts with "ironlink") and the flag
// tables (header "| flag | env | ...") right under it, up to the next
// heading.
func commandsFromDocs(t *testing.T) map[string]flagSet {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(harness.RepoRoot(), "docs", "reference", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/reference/*.md: %v", err)
	}
	docs := map[string]flagSet{}
	for _, f := range files {
		rel, _ := filepath.Rel(harness.RepoRoot(), f)
		lines, err := readLines(rel)
		if err != nil {
			t.Fatal(err)
		}
		hs := headings(lines)
		for i, h := range hs {
			m := backticked.FindStringSubmatch(h.text)
			if m == nil || !strings.HasPrefix(m[1], "ironlink") {
				continue
			}
			end := len(lines)
			if i+1 < len(hs) {
				end = hs[i+1].line
			}
			fs := flagSet{map[string]bool{}, map[string]bool{}}
			inTable, envCol := false, false
			for _, l := range lines[h.line+1 : end] {
				if !strings.HasPrefix(l, "|") {
					inTable = false
					continue
				}
				cells := strings.Split(strings.Trim(l, "|"), "|")
				for i := range cells {
					cells[i] = strings.TrimSpace(cells[i])
				}
				if !inTable {
					inTable = len(cells) > 0 && cells[0] == "flag"
					envCol = inTable && len(cells) > 1 && cells[1] == "env"
					continue
				}
				if strings.HasPrefix(cells[0], "---") {
					continue
				}
				for _, f := range docFlag.FindAllStringSubmatch(cells[0], -1) {
					fs.flags[f[1]] = true
				}
				if envCol && len(cells) > 1 {
					for _, e := range backticked.FindAllStringSubmatch(cells[1], -1) {
						if docEnv.MatchString(e[1]) {
							fs.envs[e[1]] = true
						}
					}
				}
			}
			if len(fs.flags) == 0 {
				if _, ok := docs[m[1]]; !ok {
					docs[m[1]] = fs // a command without flags, or a title
				}
				continue
			}
			if len(docs[m[1]].flags) > 0 {
				t.Errorf("%s: a second flag table for `%s`", rel, m[1])
			}
			docs[m[1]] = fs
		}
	}
	return docs
}

// docs/reference lists every flag and environment variable that each
// binary's -h shows (ironlink-hub, its subcommands, ironlink-satellite,
// every ironlink command, the simulator and the load balancer), under the
// command's own heading, and no flag or variable that -h does not show.
func TestReferenceListsEveryFlagOfEveryBinary(t *testing.T) {
	dir := binDir(t)
	help := commandsFromHelp(t, dir)
	docs := commandsFromDocs(t)
	var names []string
	for n := range help {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		fs := help[name]
		section := name
		if other, ok := sameFlagsAs[name]; ok {
			section = other
			for f := range fs.flags {
				if !help[other].flags[f] {
					t.Errorf("%s -h lists --%s, which %s does not: give %s its own section in docs/reference", name, f, other, name)
				}
			}
		}
		doc, ok := docs[section]
		if !ok {
			t.Errorf("docs/reference has no section headed `%s`", section)
			continue
		}
		for f := range fs.flags {
			if !doc.flags[f] {
				t.Errorf("%s -h lists --%s, which the flag table under `%s` in docs/reference does not", name, f, section)
			}
		}
		for e := range fs.envs {
			if !doc.envs[e] {
				t.Errorf("%s -h names the environment variable %s, which the flag table under `%s` in docs/reference does not", name, e, section)
			}
		}
	}
	for name, doc := range docs {
		fs, ok := help[name]
		if !ok {
			if len(doc.flags) > 0 {
				t.Errorf("docs/reference documents flags of `%s`, a command no -h lists", name)
			}
			continue
		}
		for f := range doc.flags {
			if !fs.flags[f] {
				t.Errorf("docs/reference lists --%s under `%s`, which %s -h does not", f, name, name)
			}
		}
		for e := range doc.envs {
			if !fs.envs[e] {
				t.Errorf("docs/reference lists the environment variable %s under `%s`, which %s -h does not name", e, name, name)
			}
		}
	}
	if len(help) < 25 {
		t.Errorf("only %d commands found in the -h outputs: is the parsing still right?", len(help))
	}
}
