package ctl_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// opsHub serves the hub's services without authentication on a TCP port
// over a fresh database holding site-a (operations capability) with one
// manageable device, node-1. It returns the address and the store.
func opsHub(t *testing.T) (string, *store.Store) {
	t.Helper()
	ctx := context.Background()
	log := testlog.New(t)
	st, url := storetest.New(t, log)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b", Replica: "r0", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now,
		Facts:      &store.Facts{Name: "node-1", ProvisionState: "manageable"},
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := app.Options{DatabaseURL: url, NoAuth: true, Plaintext: true, Replica: "r1"}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	srv := app.NewGRPCServer(cfg, log)
	linkSrv := link.NewServer(st, cfg.Link, log)
	hs := app.RegisterServices(srv, linkSrv, app.NewFleetServer(st, log))
	app.RegisterOperations(srv, hs, app.NewOperationServer(st, linkSrv, log))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), st
}

func TestOpCommands(t *testing.T) {
	addr, st := opsHub(t)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := ctl.Execute(context.Background(), ctl.Options{Stdout: &out, Stderr: &errb, PollInterval: 20 * time.Millisecond,
			Getenv: func(k string) string {
				if k == ctl.EnvConfig {
					return cfgPath
				}
				return ""
			}}, append([]string{"--hub", addr, "--plaintext", "--no-auth"}, args...))
		return out.String(), errb.String(), code
	}
	if _, errs, code := run("op", "start", "explode", "node-1", "--reason", "x"); code != ctl.ExitUsage || !strings.Contains(errs, "unknown operation kind") {
		t.Fatalf("unknown kind: exit %d %s", code, errs)
	}
	if _, errs, code := run("op", "start", "deploy", "node-1", "--reason", "x"); code != ctl.ExitUsage || !strings.Contains(errs, "image_source") {
		t.Fatalf("deploy without image: exit %d %s", code, errs)
	}
	if _, errs, code := run("op", "start", "inspect", "node-1", "--check", "gpu-burn", "--reason", "x"); code != ctl.ExitUsage || !strings.Contains(errs, "--check is for validate only") {
		t.Fatalf("--check on inspect: exit %d %s", code, errs)
	}
	if _, errs, code := run("op", "list", "--kind", "validate,hardware-reread,adopt"); code != 0 {
		t.Fatalf("op list --kind validate,hardware-reread,adopt: exit %d %s", code, errs)
	}
	out, errs, code := run("op", "start", "inspect", "node-1", "--reason", "new rack")
	if code != 0 || !strings.Contains(out, "PENDING") || !strings.Contains(out, "inspect") {
		t.Fatalf("start: exit %d\n%s%s", code, out, errs)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	if out, _, code := run("op", "list", "--state", "pending", "-o", "wide"); code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "new rack") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if out, _, code := run("op", "get", id); code != 0 || !strings.Contains(out, "node-1") {
		t.Fatalf("get: exit %d\n%s", code, out)
	}
	if out, errs, code := run("op", "start", "clean", "node-1", "--clean-step", "deploy.erase_devices_metadata", "--reason", "x"); code != ctl.ExitRefused || !strings.Contains(errs, "already running") {
		t.Fatalf("second operation on a busy device: exit %d %s%s", code, out, errs)
	}
	// The satellite's part is played by the store: the operation fails.
	ctx := context.Background()
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b2", Replica: "r0", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.MarkOperationSent(ctx, "site-a", sess.Epoch, id); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := st.RecordOperationProgress(ctx, "site-a", store.OperationProgress{OperationID: id, Attempt: 1, State: store.OperationFailed, Error: "inspection timed out"}); err != nil {
		t.Fatal(err)
	}
	out, errs, code = run("op", "watch", id)
	if code != ctl.ExitCommandFailed || !strings.Contains(out, "FAILED") || !strings.Contains(errs, "inspection timed out") {
		t.Fatalf("watch of a FAILED operation: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := run("op", "cancel", id, "--reason", "stop"); code != ctl.ExitRefused || !strings.Contains(errs, "is FAILED") {
		t.Fatalf("cancel a finished operation: exit %d %s", code, errs)
	}
	out, errs, code = run("op", "start", "provide", "node-1", "--reason", "make available", "--wait", "--timeout", "300ms")
	if code != ctl.ExitWaitTimeout {
		t.Fatalf("--wait without a satellite: exit %d, want %d\n%s%s", code, ctl.ExitWaitTimeout, out, errs)
	}
	// An enrolment left PENDING: the timeout says why it may wait (without
	// --enrol-key-file its credentials stay on the replica that took it),
	// where the link is, and how to avoid it.
	nodes := filepath.Join(t.TempDir(), "nodes.json")
	if err := os.WriteFile(nodes, []byte(`[{"name":"new-1","driver":"fake-hardware","driverInfo":{"fake_bmc_password":"s"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = run("op", "start", "enrol", "--site", "site-a", "--nodes", nodes, "--reason", "rack 9", "--wait", "--timeout", "300ms")
	if code != ctl.ExitWaitTimeout || !strings.Contains(errs, "goes out only on a site link that replica holds") ||
		!strings.Contains(errs, "the site's link is on replica r0") || !strings.Contains(errs, "give them all the same --enrol-key-file") {
		t.Fatalf("pending enrolment at the timeout: exit %d\n%s%s", code, out, errs)
	}
	// Without a link (the satellite is away) that is what the timeout says
	// first, whatever the hub's enrolment key.
	if err := st.CloseLink(ctx, "site-a", sess.Epoch); err != nil {
		t.Fatal(err)
	}
	nodes2 := filepath.Join(t.TempDir(), "nodes2.json")
	if err := os.WriteFile(nodes2, []byte(`[{"name":"new-2","driver":"fake-hardware","driverInfo":{"fake_bmc_password":"s"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = run("op", "start", "enrol", "--site", "site-a", "--nodes", nodes2, "--reason", "rack 9", "--wait", "--timeout", "300ms")
	if code != ctl.ExitWaitTimeout || !strings.Contains(errs, "Site site-a has no link to the hub now (its satellite is not connected") {
		t.Fatalf("pending enrolment without a link at the timeout: exit %d\n%s%s", code, out, errs)
	}
}

// TestOpStartEnrolNodesOfTheWrongFile: --nodes pointing at a device or a
// named pipe is a usage error naming it, at once; it was read with
// os.ReadFile, so /dev/zero ran the CLI out of memory and a named pipe
// without a writer hung it.
func TestOpStartEnrolNodesOfTheWrongFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan struct{})
		var errs string
		var code int
		go func() {
			defer close(done)
			var out, errb bytes.Buffer
			code = ctl.Execute(context.Background(), ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
				[]string{"--hub", "127.0.0.1:1", "--plaintext", "--no-auth", "op", "start", "enrol", "--site", "site-a", "--nodes", path, "--reason", "x"})
			errs = errb.String()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("--nodes %s: still reading after 10 s", path)
		}
		if code != ctl.ExitUsage || !strings.Contains(errs, "--nodes") || !strings.Contains(errs, path) || !strings.Contains(errs, "not a regular file") {
			t.Fatalf("--nodes %s: exit %d, %s", path, code, errs)
		}
	}
}

// TestEnrolOfANodeInUseTellsHowToForce: the CLI shows the hub's NODE_IN_USE
// refusal with the flag that overrides it, exit ExitRefused, and --force
// takes the node over.
func TestEnrolOfANodeInUseTellsHowToForce(t *testing.T) {
	addr, st := opsHub(t)
	ctx := context.Background()
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b2", Replica: "r0", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, Devices: []store.DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now,
		Facts:      &store.Facts{Name: "node-9", ProvisionState: "available"},
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		t.Fatal(err)
	}
	nodes := filepath.Join(t.TempDir(), "nodes.json")
	if err := os.WriteFile(nodes, []byte(`[{"name":"node-9","driver":"fake-hardware","ports":[{"address":"52:54:00:99:99:99"}]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			append([]string{"--hub", addr, "--plaintext", "--no-auth", "--config", filepath.Join(t.TempDir(), "c.yaml")}, args...))
		return errb.String(), code
	}
	errs, code := run("op", "start", "enrol", "--site", "site-a", "--nodes", nodes, "--reason", "rack 9")
	if code != ctl.ExitRefused || !strings.Contains(errs, `already has a node named "node-9"`) || !strings.Contains(errs, "pass --force") {
		t.Fatalf("enrol of an available node's name: exit %d\n%s", code, errs)
	}
	if errs, code := run("op", "start", "enrol", "--site", "site-a", "--nodes", nodes, "--reason", "take it over", "--force"); code != 0 {
		t.Fatalf("with --force: exit %d\n%s", code, errs)
	}
}

// TestOpStartNovaCreateForceClear: nova-create on a device whose node has
// an instance_uuid Nova does not know is refused, naming it and the way
// out; --force-clear is accepted and reaches the operation's parameters;
// on any other kind it is a usage error.
func TestOpStartNovaCreateForceClear(t *testing.T) {
	addr, st := opsHub(t)
	ctx := context.Background()
	const stale = "5a1e0000-0000-4000-8000-0000000000bb"
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: "b2", Replica: "r0", Capabilities: []string{"nova", "operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: 2, Devices: []store.DeviceUpdate{{DeviceID: uuid.NewString(), ObservedTime: now,
		Facts: &store.Facts{Name: "node-stale", ProvisionState: "available", PowerState: "power off", InstanceUUID: stale,
			InstanceMismatches: []store.InstanceMismatch{{Kind: store.MismatchNovaUnknown, IronicInstanceUUID: stale, FirstSeenTime: now}}},
		Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}}}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			append([]string{"--hub", addr, "--plaintext", "--no-auth"}, args...))
		return out.String(), errb.String(), code
	}
	base := []string{"op", "start", "nova-create", "site-a/node-stale", "--nova-image", "img", "--nova-name", "s1", "--reason", "x"}
	if _, errs, code := run(base...); code != ctl.ExitRefused || !strings.Contains(errs, "instance_uuid "+stale+" that Nova does not know") ||
		!strings.Contains(errs, "--force-clear") {
		t.Fatalf("nova-create on a stale instance_uuid: exit %d %s", code, errs)
	}
	if _, errs, code := run("op", "start", "inspect", "node-1", "--force-clear", "--reason", "x"); code != ctl.ExitUsage || !strings.Contains(errs, "nova-create only") {
		t.Fatalf("--force-clear on inspect: exit %d %s", code, errs)
	}
	out, errs, code := run(append(base, "--force-clear")...)
	if code != 0 || !strings.Contains(out, "PENDING") {
		t.Fatalf("nova-create --force-clear: exit %d\n%s%s", code, out, errs)
	}
	o, err := st.GetOperation(ctx, strings.Fields(strings.Split(out, "\n")[1])[0])
	if err != nil || !strings.Contains(string(o.Params), `"forceClear": true`) {
		t.Fatalf("stored params %s (%v)", o.Params, err)
	}
}
