-- +goose Up

-- The W3C trace context (https://www.w3.org/TR/trace-context/) of the
-- operator call that created a command (issue 15 item 3): the traceparent
-- and tracestate header values, as the OpenTelemetry TraceContext
-- propagator writes them. The hub puts them on the Command it delivers,
-- possibly much later on a satellite's long-lived link, so the delivery
-- and the satellite's OpenStack writes join the operator's trace. '' when
-- the call was not traced (tracing off, or no trace context).
ALTER TABLE commands
    ADD COLUMN traceparent text NOT NULL DEFAULT '',
    ADD COLUMN tracestate  text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE commands
    DROP COLUMN tracestate,
    DROP COLUMN traceparent;
