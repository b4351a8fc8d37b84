// Package streamrecv reads a gRPC stream in its own goroutine, so that the
// loop owning the stream can select on its messages alongside timers and
// queues. Both ends of the link read their stream this way.
package streamrecv

import "context"

// Start calls recv in a new goroutine and hands each message on msgs,
// which is unbuffered: the reader waits until the caller takes a message
// (backpressure). The first receive error is sent on errs (buffered) and
// ends the goroutine; so does the end of ctx.
func Start[T any](ctx context.Context, recv func() (T, error)) (msgs <-chan T, errs <-chan error) {
	out := make(chan T)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, errc
}
