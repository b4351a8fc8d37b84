package logkey_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// logMethods are the slog.Logger methods whose arguments after the message
// are key/value pairs (With: all of them).
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"With": 0,
}

// TestNoNodeKey: no log line of the hub or the satellite names a device
// "node" (the key is logkey.DeviceID, "device_id", on both sides).
func TestNoNodeKey(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../hub", "../../satellite"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				first, ok := logMethods[sel.Sel.Name]
				if !ok {
					return true
				}
				for i := first; i < len(call.Args); i += 2 {
					lit, ok := call.Args[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if k, _ := strconv.Unquote(lit.Value); k == "node" {
						t.Errorf("%s: log key %q: use logkey.DeviceID", fset.Position(lit.Pos()), k)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
