package site_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// clientPackages are the only satellite packages that make OpenStack
// requests: the implementations of the site seams, and satellite/openstack
// for Keystone and the version documents.
var clientPackages = map[string]bool{"ironic": true, "placement": true, "nova": true, "glance": true, "openstack": true}

// requestRe matches a gophercloud request: a ServiceClient's URL builder or
// one of its HTTP methods.
var requestRe = regexp.MustCompile(`\.ServiceURL\(|\.(Get|Post|Put|Patch|Delete|Head)\(ctx, [a-zA-Z.]*(URL|Url|u\b)`)

// Every OpenStack request of the satellite's product code is made in a
// client package behind the site seams, so a newcomer finds an Ironic call
// in satellite/ironic and nowhere else.
func TestOpenStackRequestsLiveInTheClientPackages(t *testing.T) {
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		if d.IsDir() {
			if clientPackages[top] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if requestRe.MatchString(line) {
				t.Errorf("%s:%d makes an OpenStack request outside the client packages: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
