package ctl_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/hub/store"
)

// `ironlink validate` starts a run; `ironlink validate runs DEVICE` shows
// it with each check: a recorded result (PASS/FAIL, duration, artifacts
// link, first line of output) and a required check still WAITING.
func TestValidateRunsShowChecks(t *testing.T) {
	addr, st := opsHub(t)
	ctx := context.Background()
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, PollInterval: 20 * time.Millisecond,
			Getenv: func(k string) string {
				if k == ctl.EnvConfig {
					return cfgPath
				}
				return ""
			}}, append([]string{"--hub", addr, "--plaintext", "--no-auth"}, args...))
		return out.String(), errb.String(), code
	}
	if out, errs, code := run("validate", "node-1", "--check", "gpu-burn", "--check", "nccl", "--reason", "back from RMA"); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errs)
	}
	runs, err := st.OpenValidationRuns(ctx, 5)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after ironlink validate: %v %v", runs, err)
	}
	if _, err := st.RecordValidationResult(ctx, runs[0].ID, "site-a", store.ValidationResult{Check: "gpu-burn", Duration: 25 * time.Minute,
		OutputExcerpt: "FAIL: 7 of 8 GPUs\nmore", ArtifactsURL: "https://ci.example/burn/7", Reporter: "burnin"}); err != nil {
		t.Fatal(err)
	}
	out, errs, code := run("validate", "runs", "node-1")
	if code != 0 {
		t.Fatalf("validate runs: exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], runs[0].ID) || !strings.Contains(lines[0], "site-a/node-1") || !strings.Contains(lines[0], "RUNNING") {
		t.Errorf("run line %q", lines[0])
	}
	for _, want := range [][]string{{"gpu-burn", "FAIL", "25m0s", "https://ci.example/burn/7", "FAIL: 7 of 8 GPUs"}, {"nccl", "WAITING"}} {
		found := false
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == want[0] {
				found = true
				for _, w := range want[1:] {
					if !strings.Contains(l, w) {
						t.Errorf("check line %q lacks %q", l, w)
					}
				}
			}
		}
		if !found {
			t.Errorf("no line for check %s in:\n%s", want[0], out)
		}
	}
}
