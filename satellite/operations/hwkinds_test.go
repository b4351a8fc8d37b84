package operations_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/site"
)

// VALIDATE inspects, reads the inspected hardware through the agent's
// reader before any cleaning, then cleans with its steps, each once, from
// and back to manageable; without clean steps it only inspects and reads.
func TestFixtureValidateInspectsThenCleans(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steps  []*ironlinkv1.CleanStep
		cleans int
	}{
		{"with clean steps", []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}, 1},
		{"without", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, r, got := fxRunner(t, "manageable")
			var reads []string // "inspects/cleans" asked when the reader ran
			r.SetHardwareReader(func(_ context.Context, id string) error {
				reads = append(reads, fmt.Sprintf("%d/%d", provisions(f, "inspect"), provisions(f, "clean")))
				return nil
			})
			p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE, fxNode,
				&ironlinkv1.OperationParams{CleanSteps: tc.steps, ValidationChecks: []string{"burn-in"}}))
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			if n, _ := f.Node(fxNode); n.ProvisionState != "manageable" {
				t.Errorf("node ends in %q, want manageable", n.ProvisionState)
			}
			if i, c := provisions(f, "inspect"), provisions(f, "clean"); i != 1 || c != tc.cleans {
				t.Errorf("inspect asked %d times, clean %d; want 1 and %d", i, c, tc.cleans)
			}
			if len(reads) != 1 || reads[0] != "1/0" {
				t.Errorf("hardware read at (inspects/cleans) %v, want once after the inspection, before any clean", reads)
			}
		})
	}
}

// HARDWARE_REREAD asks the agent's reader for the node and succeeds once
// it read; a failed read is tried again.
func TestFixtureRereadUsesTheHardwareReader(t *testing.T) {
	_, r, got := fxRunner(t, "active")
	var asked []string
	r.SetHardwareReader(func(_ context.Context, id string) error {
		asked = append(asked, id)
		if len(asked) == 1 {
			return errors.New("inventory unreadable now")
		}
		return nil
	})
	p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD, fxNode, nil))
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if len(asked) != 2 || asked[1] != fxNode {
		t.Errorf("reader asked for %v, want %s twice", asked, fxNode)
	}
}

// VALIDATE's clean request carries its clean steps as Ironic takes them,
// in order, with their arguments: the hub fills in a hardware profile's
// validation.clean_steps (Ironic's burn-in steps here) when a run names
// none (hub/operations TestValidateUsesTheProfilesCleanSteps).
func TestFixtureValidateSendsItsCleanSteps(t *testing.T) {
	f, r, got := fxRunner(t, "manageable")
	r.SetHardwareReader(func(context.Context, string) error { return nil })
	args, err := structpb.NewStruct(map[string]any{"example_arg": "passed through"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "burnin_cpu"}, {Interface: "deploy", Step: "burnin_memory", Args: args}}
	p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE, fxNode, &ironlinkv1.OperationParams{CleanSteps: steps}))
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	var sent []any
	for _, c := range f.Calls() {
		if c.Method == site.MethodSetProvisionState && c.Trait == "clean" && c.Err == nil {
			sent = append(sent, c.Extra["clean_steps"])
		}
	}
	want := []any{[]map[string]any{
		{"interface": "deploy", "step": "burnin_cpu", "args": map[string]any{}},
		{"interface": "deploy", "step": "burnin_memory", "args": map[string]any{"example_arg": "passed through"}},
	}}
	if !reflect.DeepEqual(sent, want) {
		t.Fatalf("clean requests sent clean_steps %v, want %v", sent, want)
	}
}
