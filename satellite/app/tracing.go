package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"

	"github.com/ironlink/ironlink/internal/telemetry"
)

// setupTracing turns OpenTelemetry tracing on when the OTEL_* variables ask
// for it (internal/telemetry): the hub link's RPCs get client spans that the
// hub continues, and every OpenStack request a span of its own, wrapped
// around wrap (the metrics transport). It returns the dial options to add,
// the transport wrapper to use, and the flush to call at exit.
func setupTracing(log *slog.Logger, wrap func(http.RoundTripper) http.RoundTripper) ([]grpc.DialOption, func(http.RoundTripper) http.RoundTripper, func(), error) {
	shutdown, on, err := telemetry.Setup(context.Background(), "ironlink-satellite")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tracing: %w", err)
	}
	flush := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}
	if !on {
		return nil, wrap, flush, nil
	}
	log.Info("tracing on: spans go to the OTLP exporter set by OTEL_* variables")
	traced := func(base http.RoundTripper) http.RoundTripper { return otelhttp.NewTransport(wrap(base)) }
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}, traced, flush, nil
}
