package healthsim

import (
	"context"
	"fmt"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ironlink/ironlink/gen/datamodels"
)

// Door is a client of a satellite's local health door.
type Door struct {
	cc     *grpc.ClientConn
	client datamodels.PlatformConnectorClient
}

// Dial connects to the door on the Unix socket at path (the satellite's
// --health-socket; relative to the working directory). The connection is
// made on the first call.
func Dial(path string) (*Door, error) {
	abs, err := filepath.Abs(path) // "unix://" takes an absolute path only
	if err != nil {
		return nil, fmt.Errorf("health door %s: %w", path, err)
	}
	cc, err := grpc.NewClient("unix://"+abs, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("health door %s: %w", path, err)
	}
	return &Door{cc: cc, client: datamodels.NewPlatformConnectorClient(cc)}, nil
}

// Send reports events as one batch. It returns when the hub committed
// them (the door answers after the hub's commit) or with the door's status
// error: InvalidArgument, NotFound or FailedPrecondition as the hub
// refused the batch, Unavailable when the hub did not answer within the
// satellite's --health-wait (the events stay spooled).
func (d *Door) Send(ctx context.Context, events ...*datamodels.HealthEvent) error {
	if _, err := d.client.HealthEventOccurredV1(ctx, &datamodels.HealthEvents{Version: 1, Events: events}); err != nil {
		return fmt.Errorf("HealthEventOccurredV1 (%d events): %w", len(events), err)
	}
	return nil
}

// Close closes the connection.
func (d *Door) Close() error { return d.cc.Close() }
