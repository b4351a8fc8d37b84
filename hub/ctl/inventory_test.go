package ctl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestInventoryCoversEveryRPC walks the proto registry: every RPC of every
// ironlink.v1 service that is not in NonOperatorServices must have at
// least one CLI command in Inventory (a new RPC without a command fails
// here), every command named there must exist in the command tree with
// the flags it names, Inventory must name no RPC that does not exist, and
// docs/reference/cli.md must carry the table as InventoryMarkdown renders
// it.
func TestInventoryCoversEveryRPC(t *testing.T) {
	var rpcs []string
	services := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage("ironlink.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			name := string(sd.Name())
			services[name] = true
			if _, skip := NonOperatorServices[name]; skip {
				continue
			}
			for j := 0; j < sd.Methods().Len(); j++ {
				rpcs = append(rpcs, name+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(rpcs) < 20 {
		t.Fatalf("found only %d operator RPCs in the registry: %v", len(rpcs), rpcs)
	}
	for s := range NonOperatorServices {
		if !services[s] {
			t.Errorf("NonOperatorServices names %s, which ironlink.v1 does not have", s)
		}
	}
	byRPC := map[string]InventoryEntry{}
	for _, e := range Inventory {
		if _, dup := byRPC[e.RPC]; dup {
			t.Errorf("Inventory lists %s twice", e.RPC)
		}
		byRPC[e.RPC] = e
		if !slices.Contains(rpcs, e.RPC) {
			t.Errorf("Inventory lists %s, which is not an RPC of an operator service", e.RPC)
		}
	}
	for _, r := range rpcs {
		if len(byRPC[r].Commands) == 0 {
			t.Errorf("RPC %s has no CLI command: add one to the ironlink CLI and to ctl.Inventory", r)
		}
	}
	root, _ := newRoot(Options{})
	for _, e := range Inventory {
		for _, c := range e.Commands {
			words := strings.Fields(c)
			if words[0] != "ironlink" {
				t.Errorf("%s: command %q does not start with ironlink", e.RPC, c)
				continue
			}
			// the command's words, then arguments (NAME, ID), then flags with their values
			var path, flags []string
			for _, w := range words[1:] {
				switch {
				case strings.HasPrefix(w, "-"):
					flags = append(flags, strings.TrimLeft(w, "-"))
				case len(flags) > 0 || strings.ToUpper(w) == w:
				default:
					path = append(path, w)
				}
			}
			cmd, _, err := root.Find(path)
			if err != nil || cmd.CommandPath() != "ironlink "+strings.Join(path, " ") {
				t.Errorf("%s: command %q is not in the command tree (%v)", e.RPC, c, err)
				continue
			}
			for _, f := range flags {
				if cmd.Flags().Lookup(f) == nil && cmd.Flags().ShorthandLookup(f) == nil {
					t.Errorf("%s: %q has no flag %s", e.RPC, c, f)
				}
			}
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), InventoryMarkdown()) {
		t.Errorf("docs/reference/cli.md lacks the inventory table; put this in it:\n%s", InventoryMarkdown())
	}
}
