package grpcerr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The packages whose constructors make a gRPC status, and what of each
// builds one. Reading a status (status.FromError, status.Code,
// status.Convert, st.Code(), st.Details()) is allowed anywhere.
const (
	statusPkg    = "google.golang.org/grpc/status"
	spbPkg       = "google.golang.org/genproto/googleapis/rpc/status"
	errdetailPkg = "google.golang.org/genproto/googleapis/rpc/errdetails"
)

// statusBuilders are the functions of statusPkg that make a status.
var statusBuilders = map[string]bool{
	"Error": true, "Errorf": true, "New": true, "Newf": true,
	"FromContextError": true, "FromProto": true, "ErrorProto": true,
}

// productRoots are the trees of product code, relative to the module root.
var productRoots = []string{"hub", "satellite", "internal"}

// errorMapDir is the hub's error map, the one package that turns domain
// errors into statuses; plainStatusDir builds the detail-less statuses of
// code outside hub/ (the satellite's health door), which may not import it.
const (
	errorMapDir    = "hub/grpcerr"
	plainStatusDir = "internal/rpcstatus"
)

// TestOnlyGrpcerrBuildsStatuses fails when product code outside hub/grpcerr
// builds a gRPC status: it parses every .go file under hub/, satellite/ and
// internal/ except tests (_test.go) and generated files ("Code generated"),
// and reports, by file:line,
//   - a use (a call, or the function as a value) of status.Error, Errorf,
//     New, Newf, FromContextError, FromProto or ErrorProto
//     (google.golang.org/grpc/status, under whatever name the file imports
//     it), or a dot import of that package or of the two below;
//   - a use of a method named WithDetails;
//   - a composite literal or new() of a type of
//     google.golang.org/genproto/googleapis/rpc/status (spb.Status) or of
//     .../rpc/errdetails (ErrorInfo, BadRequest, RetryInfo, ...).
//
// Type assertions to errdetails types (reading details) are not reported.
// The fix is to add the status to hub/grpcerr: a case of the error map
// (errmap.go) for a domain error, or a named constructor (statuses.go,
// grpcerr.go), and to call it.
func TestOnlyGrpcerrBuildsStatuses(t *testing.T) {
	root := moduleRoot(t)
	var found []string
	for _, r := range productRoots {
		err := filepath.WalkDir(filepath.Join(root, r), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == errorMapDir || rel == plainStatusDir || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			found = append(found, statusBuilds(t, path, rel)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("%s\n\tbuilds a gRPC status outside hub/grpcerr. Add it to hub/grpcerr (a case of the error map in errmap.go for a domain error, or a named constructor in statuses.go) and call that here; outside hub/, call internal/rpcstatus.", f)
	}
}

// statusBuilds parses the file at path (rel from the module root) and
// returns "rel:line: what" for each place that builds a status; nil for a
// generated file.
func statusBuilds(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	if ast.IsGenerated(f) {
		return nil
	}
	names := importNames(f) // local name -> import path
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, rel+":"+strconv.Itoa(fset.Position(n.Pos()).Line)+": "+what)
	}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); imp.Name != nil && imp.Name.Name == "." && (p == statusPkg || p == spbPkg || p == errdetailPkg) {
			report(imp, "dot import of "+p+" (its constructors could not be told apart)")
		}
	}
	pkgOf := func(e ast.Expr) (path, sel string) {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", ""
		}
		id, ok := s.X.(*ast.Ident)
		if !ok {
			return "", ""
		}
		return names[id.Name], s.Sel.Name
	}
	isBuiltType := func(e ast.Expr) (string, bool) {
		if p, sel := pkgOf(e); p == spbPkg || p == errdetailPkg {
			return p[strings.LastIndex(p, "/")+1:] + "." + sel, true
		}
		return "", false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr: // a call, or a function value passed on
			if p, sel := pkgOf(n); p == statusPkg && statusBuilders[sel] {
				report(n, "status."+sel)
			}
			if n.Sel.Name == "WithDetails" {
				report(n, "WithDetails")
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 {
				if typ, ok := isBuiltType(n.Args[0]); ok {
					report(n, "new("+typ+")")
				}
			}
		case *ast.CompositeLit:
			if typ, ok := isBuiltType(n.Type); ok {
				report(n, typ+"{...}")
			}
		}
		return true
	})
	return out
}

// importNames maps each import's local name in f to its path (the last
// path element when the import has no name; blank imports are skipped).
func importNames(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" {
			continue
		}
		m[name] = p
	}
	return m
}

// moduleRoot is the directory holding go.mod, found upward from the test's
// directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
