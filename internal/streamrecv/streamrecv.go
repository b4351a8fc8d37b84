// Package streamrecv reads a gRPC stream in its own goroutine, so that the
// loop owning the stream can select on its messages alongside timers and
// queues. Both ends of the link read their stream this way.
package streamrecv

import "context"

// Start calls recv in a new goroutine and hands each message on msgs,
// which is unbuffered: the reader waits until the caller takes a message
// (backpressure). The first receive error is sent on errs (buffered) and
// ends the reader; so does the end of ctx.
//
// recv is called once at a time, in order, but each call after a message
// runs on a fresh goroutine (the one before hands over and returns): a
// long-lived reader would keep for the stream's life the stack that
// decoding messages grew (the runtime shrinks a stack only by half per
// garbage collection), and an idle link waits in recv with a small one.
func Start[T any](ctx context.Context, recv func() (T, error)) (msgs <-chan T, errs <-chan error) {
	out := make(chan T)
	errc := make(chan error, 1)
	var read func()
	read = func() {
		m, err := recv()
		if err != nil {
			errc <- err
			return
		}
		select {
		case out <- m:
			go read()
		case <-ctx.Done():
		}
	}
	go read()
	return out, errc
}
