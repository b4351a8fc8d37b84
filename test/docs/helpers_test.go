package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ironlink/ironlink/test/harness"
)

// docFiles returns README.md and every .md file under docs/, relative to
// the repository root.
func docFiles() ([]string, error) {
	root := harness.RepoRoot()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// heading is one markdown heading.
type heading struct {
	level int
	text  string
	line  int // index into the file's lines
}

// headings returns the headings of a markdown text, outside fenced blocks.
func headings(lines []string) []heading {
	var hs []heading
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "#"))
		if n > 6 || len(l) <= n || l[n] != ' ' {
			continue
		}
		hs = append(hs, heading{level: n, text: strings.TrimSpace(l[n:]), line: i})
	}
	return hs
}

var anchorDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)

// anchor is GitHub's anchor of a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces as '-'.
func anchor(text string) string {
	s := strings.ToLower(text)
	s = anchorDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// anchors returns the anchors of a markdown file's headings, with GitHub's
// -1, -2, … suffixes for repeated ones.
func anchors(lines []string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(lines) {
		a := anchor(h.text)
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// readLines reads a file of the repository as lines.
func readLines(rel string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), rel))
	if err != nil {
		return nil, err
	}
	return strings.Split(string(b), "\n"), nil
}

// bins is a directory with every binary `make build` makes, built once
// by the first test that needs them and removed by TestMain.
var bins struct {
	once sync.Once
	dir  string
	err  error
}

// binaries are the main packages `make build` compiles into bin/.
var binaries = []string{
	"./hub/cmd/ironlink",
	"./hub/cmd/ironlink-hub",
	"./satellite/cmd/ironlink-satellite",
	"./internal/openstacksim/cmd/ironlink-openstacksim",
	"./internal/tcpproxy/cmd/ironlink-lb",
}

// binDir builds the binaries (once) and returns their directory.
func binDir(t *testing.T) string {
	t.Helper()
	bins.once.Do(func() {
		bins.dir, bins.err = os.MkdirTemp("", "ironlink-docs-bin-")
		if bins.err != nil {
			return
		}
		cmd := exec.Command("go", append([]string{"build", "-o", bins.dir + "/"}, binaries...)...)
		cmd.Dir = harness.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}
