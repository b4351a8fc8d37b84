package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/test/harness"
)

var (
	docCitation     = regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md`)
	openstackTarget = regexp.MustCompile(`docs/design/openstack\.md[ \t]+((?:§\d+(?:\.\d+)?(?:[–,]?\s*(?:and\s+)?)?)+)`)
	sectionNumber   = regexp.MustCompile(`§(\d+(?:\.\d+)?)`)
	headingNumber   = regexp.MustCompile(`^(\d+(?:\.\d+)?)\.? `)
)

// Code, comments, charts and scripts cite docs/ files that exist, and a
// citation of docs/design/openstack.md §N names a section it has, so
// that a citation cannot outlive the text it points to.
func TestCitationsOfDocsResolve(t *testing.T) {
	root := harness.RepoRoot()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	lines, err := readLines("docs/design/openstack.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, h := range headings(lines) {
		if m := headingNumber.FindStringSubmatch(h.text); m != nil {
			sections[m[1]] = true
		}
	}
	cited := 0
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(f, "docs/") || strings.HasSuffix(f, ".md") {
			continue // the docs' own links: TestEveryRelativeLinkResolves
		}
		switch filepath.Ext(f) {
		case ".go", ".proto", ".yaml", ".yml", ".json", ".sh", ".service", ".tpl", ".txt", "":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed but deleted in the work tree
		}
		text := string(b)
		for _, c := range docCitation.FindAllString(text, -1) {
			cited++
			if _, err := os.Stat(filepath.Join(root, c)); err != nil {
				t.Errorf("%s cites %s, which does not exist", f, c)
			}
		}
		// "//" continuation of a comment is blank-like between §s.
		flat := strings.ReplaceAll(text, "\n//", " ")
		for _, m := range openstackTarget.FindAllStringSubmatch(flat, -1) {
			for _, n := range sectionNumber.FindAllStringSubmatch(m[1], -1) {
				if !sections[n[1]] {
					t.Errorf("%s cites docs/design/openstack.md §%s, which has no such section", f, n[1])
				}
			}
		}
	}
	if cited == 0 {
		t.Error("found no citation of docs/ outside docs/: is the pattern still right?")
	}
}
