package ctl

import (
	"context"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// asOfHelp is the help text of --as-of on `get devices` and `describe device`.
const asOfHelp = "show the fleet as it was at this time, from the hub's histories: an RFC 3339 time " +
	"(2026-12-01T03:00:00Z) or a duration ago (90m, 9h)"

// parseAsOf reads --as-of: "" (the present: nil), an RFC 3339 time, or a
// Go duration meaning that long before now.
func parseAsOf(s string, now time.Time) (*timestamppb.Timestamp, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return timestamppb.New(t), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return nil, usageErrf("--as-of %q: want an RFC 3339 time (2026-12-01T03:00:00Z) or a positive duration ago (90m, 9h)", s)
	}
	return timestamppb.New(now.Add(-d)), nil
}

// getDeviceAsOf is getDevice with the request's as_of set (nil: the present).
func (c *client) getDeviceAsOf(ctx context.Context, d deviceArg, historyLimit int32, asOf *timestamppb.Timestamp) (*ironlinkv1.GetDeviceResponse, error) {
	if asOf == nil {
		return c.getDevice(ctx, d, historyLimit)
	}
	cctx, cancel := c.call(ctx)
	defer cancel()
	req := d.getRequest(historyLimit)
	req.AsOf = asOf
	r, err := c.fleet.GetDevice(cctx, req)
	if err != nil {
		return nil, c.explain(err)
	}
	return r, nil
}
