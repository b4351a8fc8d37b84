package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// longFuncs lists the product functions allowed over MaxFuncLines, keyed
// "dir/file.go:Func" (methods "dir/file.go:Type.Method"), each with one
// line of reason. Only tables belong here; it is empty today.
var longFuncs = map[string]string{}

// longFiles lists the product files allowed over MaxFileLines, keyed by
// path, with a reason; ideally empty.
var longFiles = map[string]string{}

// longMains lists the commands whose main.go may exceed MaxMainLines.
var longMains = map[string]string{}

// productFile is one parsed product source file.
type productFile struct {
	path  string // slash-separated, relative to the repository root
	lines int
	file  *ast.File
	fset  *token.FileSet
}

// productFiles parses every product .go file of the repository: not a
// test, not generated (gen/), not test infrastructure (test/), not
// testdata, not hidden.
func productFiles(t *testing.T) []productFile {
	t.Helper()
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	fset := token.NewFileSet()
	var out []productFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel == "gen" || rel == "test" || name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, productFile{path: rel, lines: fset.File(f.Pos()).LineCount(), file: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found only %d product files: is the walk rooted at the repository?", len(out))
	}
	return out
}

// funcKey names a function "Func" or, for a method, "Type.Method".
func funcKey(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// checkAllowlist fails for found places over the limit that are not
// allowed, and for allowed places that are no longer over it (so the list
// shrinks as the code does).
func checkAllowlist(t *testing.T, what, fix string, limit int, found map[string]int, allowed map[string]string) {
	t.Helper()
	var keys []string
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := allowed[k]; !ok {
			t.Errorf("%s %s is %d lines, over %d: %s", what, k, found[k], limit, fix)
		}
	}
	for k, reason := range allowed {
		if strings.TrimSpace(reason) == "" {
			t.Errorf("allowlisted %s %s has no reason", what, k)
		}
		if _, ok := found[k]; !ok {
			t.Errorf("allowlisted %s %s is no longer over %d lines (or is gone): remove it from the allowlist", what, k, limit)
		}
	}
}

// No product function is over MaxFuncLines lines unless it is allowlisted.
func TestNoLongFunctions(t *testing.T) {
	found := map[string]int{}
	for _, pf := range productFiles(t) {
		for _, decl := range pf.file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := pf.fset.Position(fn.End()).Line - pf.fset.Position(fn.Pos()).Line + 1
			if n > MaxFuncLines {
				found[pf.path+":"+funcKey(fn)] = n
			}
		}
	}
	checkAllowlist(t, "function", "split it by step (a table may be allowlisted, with a reason)", MaxFuncLines, found, longFuncs)
}

// No product file is over MaxFileLines lines unless it is allowlisted.
func TestNoLongFiles(t *testing.T) {
	found := map[string]int{}
	for _, pf := range productFiles(t) {
		if pf.lines > MaxFileLines {
			found[pf.path] = pf.lines
		}
	}
	checkAllowlist(t, "file", "split it by purpose", MaxFileLines, found, longFiles)
}

// Every command's main.go (package main) is under MaxMainLines lines:
// flags, validation and serving live in packages a test can call.
func TestMainsAreThin(t *testing.T) {
	found := map[string]int{}
	mains := 0
	for _, pf := range productFiles(t) {
		if pf.file.Name.Name != "main" || filepath.Base(pf.path) != "main.go" {
			continue
		}
		mains++
		if pf.lines >= MaxMainLines {
			found[pf.path] = pf.lines
		}
	}
	if mains < 4 {
		t.Fatalf("found %d main.go files, want the hub, satellite, CLI and simulator at least", mains)
	}
	checkAllowlist(t, "main.go", "move flags, validation and serving into a package", MaxMainLines, found, longMains)
}
