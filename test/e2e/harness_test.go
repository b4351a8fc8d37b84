package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ironlink/ironlink/test/harness"
)

// bins holds ironlink-hub, ironlink-satellite and the ironlink CLI built
// once by TestMain.
var bins harness.Binaries

func TestMain(m *testing.M) { harness.Main(m, &bins, "./hub/cmd/ironlink") }

// startHub starts ironlink-hub on a free loopback port over dbURL, with TLS
// and authentication from id, and returns its address once its health
// service answers SERVING.
func startHub(t *testing.T, dbURL string, id *identity, extra ...string) (string, *harness.Proc) {
	t.Helper()
	addr := harness.FreeAddr(t)
	args := append([]string{"--database-url", dbURL, "--listen", addr, "--admin-addr", harness.FreeAddr(t), "--command-sweep", "1s", "--log-level", "debug"}, id.hubArgs()...)
	args = append(args, extra...)
	p := harness.Start(t, "ironlink-hub", bins.Hub(), args...)
	h := healthpb.NewHealthClient(id.dialAs(t, addr, ""))
	harness.Eventually(t, 30*time.Second, func() error {
		if p.Exited() {
			t.Fatalf("hub exited early:\n%s", p.Output())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %v", r.GetStatus())
		}
		return nil
	})
	return addr, p
}
