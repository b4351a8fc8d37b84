-- +goose Up

-- One row per BulkService call that created commands (issue 12 item 5):
-- who asked for what, why, with which selector and how many devices it
-- matched. Every command it created carries its id (commands.request_id),
-- so ListCommands lists them together.
CREATE TABLE bulk_requests (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    desired      text        NOT NULL CHECK (desired IN ('QUARANTINED', 'RELEASED')),
    -- The selector in the CLI's form, e.g. "site=site-b,status=FAULTED".
    selector     text        NOT NULL,
    actor        text        NOT NULL,
    reason       text        NOT NULL,
    source       text        NOT NULL,
    device_count integer     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE commands ADD COLUMN request_id uuid REFERENCES bulk_requests (id);
CREATE INDEX commands_request ON commands (request_id, created_at DESC, id) WHERE request_id IS NOT NULL;

-- +goose Down
DROP INDEX commands_request;
ALTER TABLE commands DROP COLUMN request_id;
DROP TABLE bulk_requests;
