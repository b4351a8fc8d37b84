package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/test/harness"
)

// mdLink matches an inline markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in README.md and docs/ names a file of the
// repository, and an anchor in it (#...) names one of its headings.
func TestEveryRelativeLinkResolves(t *testing.T) {
	files, err := docFiles()
	if err != nil {
		t.Fatal(err)
	}
	root := harness.RepoRoot()
	anchorsOf := map[string]map[string]bool{}
	fileAnchors := func(rel string) (map[string]bool, error) {
		if a, ok := anchorsOf[rel]; ok {
			return a, nil
		}
		lines, err := readLines(rel)
		if err != nil {
			return nil, err
		}
		anchorsOf[rel] = anchors(lines)
		return anchorsOf[rel], nil
	}
	links := 0
	for _, f := range files {
		lines, err := readLines(f)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(stripCode(l), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, frag, _ := strings.Cut(target, "#")
				rel := f
				if file != "" {
					rel = path.Join(path.Dir(f), file)
					st, err := os.Stat(filepath.Join(root, rel))
					if err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", f, i+1, target, rel)
						continue
					}
					if st.IsDir() {
						if frag != "" {
							t.Errorf("%s:%d: link %q: an anchor into a directory", f, i+1, target)
						}
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not markdown", f, i+1, target)
					continue
				}
				a, err := fileAnchors(rel)
				if err != nil {
					t.Fatal(err)
				}
				if !a[frag] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", f, i+1, target, rel, frag)
				}
			}
		}
	}
	if links < 100 {
		t.Errorf("found only %d relative links in %d files: is the link pattern still right?", links, len(files))
	}
}

// stripCode drops inline code spans, whose text is not a link.
func stripCode(l string) string {
	var b strings.Builder
	in := false
	for _, r := range l {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The anchor rule follows GitHub's.
func TestAnchorsAreGitHubs(t *testing.T) {
	for text, want := range map[string]string{
		"The fleet at a past instant (`as_of`)":   "the-fleet-at-a-past-instant-as_of",
		"1.2 Provision state machine":             "12-provision-state-machine",
		"The link (satellite ↔ hub)":              "the-link-satellite--hub",
		"`ironlink get devices`":                  "ironlink-get-devices",
		"Run the hub on Kubernetes, step by step": "run-the-hub-on-kubernetes-step-by-step",
	} {
		if got := anchor(text); got != want {
			t.Errorf("anchor(%q) = %q, want %q", text, got, want)
		}
	}
}

// The README stays an entry point (issue 20: under 200 lines) that leads
// into docs/; the rest lives there.
func TestREADMEStaysShortAndLeadsIntoDocs(t *testing.T) {
	lines, err := readLines("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) >= 200 {
		t.Errorf("README.md has %d lines: move what is not an introduction into docs/", len(lines))
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{"make demo", "make test", "(docs/README.md)", "(docs/tutorial.md)"} {
		if !strings.Contains(text, want) {
			t.Errorf("README.md no longer mentions %s", want)
		}
	}
}
