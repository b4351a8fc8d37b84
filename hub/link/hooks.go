package link

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ironlink/ironlink/hub/store"
)

// Hooks are optional callbacks the link server calls on link, batch and
// command events, for metrics (hub/metrics fills them in). Every field may be
// nil. They are called on the link's own goroutines, so they must be quick
// and must not block.
type Hooks struct {
	// LinkOpened: a link of site was registered on this replica.
	LinkOpened func(site string)
	// LinkEnded: the link of site ended; reason is one of the LinkEnd* constants.
	LinkEnded func(site, reason string)
	// LinkTakeover: a link of site replaced another satellite process's link
	// that had been open less than TakeoverWarnAge (two satellites running
	// for one site take the link from each other every few seconds).
	LinkTakeover func(site string)
	// BatchCommitted: a batch of devices device updates was committed (or
	// acked as a duplicate without effect) in took.
	BatchCommitted func(site string, devices int, snapshot, duplicate bool, took time.Duration)
	// CommandSent: command id went down the link of site (redelivery: it
	// had been sent before).
	CommandSent func(site, commandID string, redelivery bool)
	// CommandResult: the satellite reported the result of command id and
	// it was recorded (ignored: its generation was superseded).
	CommandResult func(site, commandID string, success, ignored bool)
}

// Reasons a link ends, as passed to Hooks.LinkEnded.
const (
	// LinkEndClosed: the satellite closed the stream.
	LinkEndClosed = "closed"
	// LinkEndSuperseded: a newer link of the site on this replica replaced it.
	LinkEndSuperseded = "superseded"
	// LinkEndFenced: a newer link on another replica fenced its writes.
	LinkEndFenced = "fenced"
	// LinkEndDrained: this replica is shutting down.
	LinkEndDrained = "drained"
	// LinkEndRevoked: the client lost its place in the roster.
	LinkEndRevoked = "revoked"
	// LinkEndRefused: the satellite sent something the hub refused
	// (InvalidArgument, PermissionDenied, ResourceExhausted).
	LinkEndRefused = "refused"
	// LinkEndUnavailable: the hub could not record something (database).
	LinkEndUnavailable = "unavailable"
	// LinkEndError: the stream broke (transport error, cancelled).
	LinkEndError = "error"
)

func (h Hooks) takeover(site string) {
	if h.LinkTakeover != nil {
		h.LinkTakeover(site)
	}
}

func (h Hooks) opened(site string) {
	if h.LinkOpened != nil {
		h.LinkOpened(site)
	}
}

// ended classifies how a link ended from its context's cause and the error
// Connect returns.
func (h Hooks) ended(site string, ctx context.Context, err error) {
	if h.LinkEnded == nil {
		return
	}
	reason := LinkEndError
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errSuperseded):
		reason = LinkEndSuperseded
	case errors.Is(cause, errDraining):
		reason = LinkEndDrained
	case errors.Is(cause, errRevoked):
		reason = LinkEndRevoked
	case err == nil || errors.Is(err, io.EOF):
		reason = LinkEndClosed
	default:
		switch status.Code(err) {
		case codes.Aborted:
			reason = LinkEndFenced
		case codes.InvalidArgument, codes.PermissionDenied, codes.ResourceExhausted:
			reason = LinkEndRefused
		case codes.Unavailable:
			reason = LinkEndUnavailable
		}
	}
	h.LinkEnded(site, reason)
}

func (h Hooks) committed(site string, b store.Batch, res store.BatchResult, took time.Duration) {
	if h.BatchCommitted != nil {
		h.BatchCommitted(site, len(b.Devices), b.SnapshotID != "", res.Duplicate, took)
	}
}

func (h Hooks) sent(site, id string, redelivery bool) {
	if h.CommandSent != nil {
		h.CommandSent(site, id, redelivery)
	}
}

func (h Hooks) result(site, id string, success, ignored bool) {
	if h.CommandResult != nil {
		h.CommandResult(site, id, success, ignored)
	}
}
