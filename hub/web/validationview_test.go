package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
)

// The device page lists the device's validation runs with each check's
// name, result, duration, output (expandable) and artifacts link; a device
// without runs says so.
func TestDevicePageValidationRuns(t *testing.T) {
	e := newEnv(t)
	h := consoleServer(t, e)
	ctx := context.Background()
	dev := e.ids["alpha"][0]
	params, _ := protojson.Marshal(&ironlinkv1.OperationParams{ValidationChecks: []string{"gpu-burn", "nccl"}})
	_, ops, err := e.st.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: "alpha", DeviceID: dev, Kind: "VALIDATE",
		Params: params, Actor: "ops", Reason: "back from RMA"}})
	if err != nil {
		t.Fatal(err)
	}
	run := ops[0].ID
	long := strings.Repeat("step ok\n", 40) + "FAIL: 7 of 8 GPUs"
	if _, err := e.st.RecordValidationResult(ctx, run, "alpha", store.ValidationResult{Check: "gpu-burn", Duration: 90 * time.Second,
		OutputExcerpt: long, ArtifactsURL: "https://artifacts.example/gpu-burn", Reporter: "burnin"}); err != nil {
		t.Fatal(err)
	}
	w := do(t, h, "GET", "/devices/"+dev, "ops-read", "", nil, nil)
	body := w.Body.String()
	for _, want := range []string{`id="vrun-` + run + `" data-state="running"`, `data-check="gpu-burn" data-result="fail"`,
		"<td>1m30s</td>", `<a href="https://artifacts.example/gpu-burn" rel="noopener noreferrer">artifacts</a>`,
		"FAIL: 7 of 8 GPUs</pre>", "<td>burnin</td>"} {
		if w.Code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("device page: %d, want %s in the validation runs:\n%.3000s", w.Code, want, body[strings.Index(body, `id="validation-runs"`):])
		}
	}
	if w := do(t, h, "GET", "/devices/"+e.ids["alpha"][1], "ops-read", "", nil, nil); !strings.Contains(w.Body.String(), "No validation run.") {
		t.Fatalf("device without runs does not say so")
	}
}
