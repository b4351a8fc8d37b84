package web

import (
	"context"
	"io"

	"google.golang.org/grpc/metadata"
)

// callStream is a server-streaming RPC's stream inside the hub's own
// process: the view calls a streaming handler (FleetService.WatchFleet,
// OperationService.WatchOperation) as gRPC would, with the caller's
// context, and takes each message the handler sends through send. It
// implements grpc.ServerStreamingServer[T]; headers and trailers are
// dropped, and RecvMsg reports io.EOF (a server stream receives nothing
// after its request).
type callStream[T any] struct {
	ctx  context.Context
	send func(*T) error
}

// Send hands m to the view; its error ends the handler.
func (c *callStream[T]) Send(m *T) error { return c.send(m) }

// SendMsg is Send for a message of type *T.
func (c *callStream[T]) SendMsg(m any) error { return c.send(m.(*T)) }

// RecvMsg reports io.EOF.
func (c *callStream[T]) RecvMsg(any) error { return io.EOF }

// Context is the caller's context (apiContext), ended when the view stops reading.
func (c *callStream[T]) Context() context.Context { return c.ctx }

// SetHeader drops md.
func (c *callStream[T]) SetHeader(metadata.MD) error { return nil }

// SendHeader drops md.
func (c *callStream[T]) SendHeader(metadata.MD) error { return nil }

// SetTrailer drops md.
func (c *callStream[T]) SetTrailer(metadata.MD) {}
