-- +goose Up

-- Operations (SPEC "Operations", issue 13): durable desired work on one
-- target, delivered to the site's satellite over the link like a command and
-- run there as a reconcile against Ironic's provision state machine.
--
-- No secret is ever stored here: for ENROL, node holds the node spec with
-- every driver_info value replaced by "***" (only the key names are kept);
-- the values live in the memory of the hub replica that took the request
-- (secret_holder) until the operation ends (hub/operations/vault).
CREATE TABLE operations (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Operations created by one StartOperation share it.
    group_id          uuid        NOT NULL,
    site              text        NOT NULL REFERENCES sites (name),
    -- Ironic node UUID; NULL for an ENROL until the node exists. No foreign
    -- key: an enrolled node is reported by progress before its first batch.
    device_id         uuid,
    device_name       text        NOT NULL DEFAULT '',
    kind              text        NOT NULL CHECK (kind IN ('ENROL', 'INSPECT', 'CLEAN', 'PROVIDE', 'DEPLOY',
                                                           'UNDEPLOY', 'NOVA_CREATE', 'NOVA_DELETE')),
    -- ironlink.v1.NodeSpec as protojson, driver_info values redacted; NULL
    -- but for ENROL.
    node              jsonb,
    -- ironlink.v1.OperationParams as protojson.
    params            jsonb       NOT NULL DEFAULT '{}',
    state             text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    actor             text        NOT NULL,
    reason            text        NOT NULL,
    source            text        NOT NULL DEFAULT '',
    forced            boolean     NOT NULL DEFAULT false,
    -- Delivery attempts; the attempt of the last progress accepted.
    attempts          integer     NOT NULL DEFAULT 0,
    progress_attempt  integer     NOT NULL DEFAULT 0,
    last_error        text        NOT NULL DEFAULT '',
    failure_reason    text        NOT NULL DEFAULT '',
    provision_state   text        NOT NULL DEFAULT '',
    server_id         text        NOT NULL DEFAULT '',
    -- ironlink.v1.OperationStep list as protojson, replaced by each progress.
    steps             jsonb       NOT NULL DEFAULT '[]',
    cancel_requested  boolean     NOT NULL DEFAULT false,
    cancel_actor      text        NOT NULL DEFAULT '',
    cancel_reason     text        NOT NULL DEFAULT '',
    -- Replica process holding an ENROL's driver_info in memory ("" else).
    secret_holder     text        NOT NULL DEFAULT '',
    traceparent       text        NOT NULL DEFAULT '',
    tracestate        text        NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- Last delivery; NULL: due now (never sent, or a cancel to send).
    sent_at           timestamptz,
    -- Last progress accepted.
    progress_at       timestamptz,
    started_at        timestamptz,
    ended_at          timestamptz
);
-- One active operation per device, and per node name being enrolled.
CREATE UNIQUE INDEX operations_one_active ON operations (device_id)
    WHERE state IN ('PENDING', 'RUNNING') AND device_id IS NOT NULL;
CREATE UNIQUE INDEX operations_one_active_enrol ON operations (site, device_name)
    WHERE state IN ('PENDING', 'RUNNING') AND kind = 'ENROL';
-- Delivery: the open operations of a site.
CREATE INDEX operations_open ON operations (site, state, created_at) WHERE state IN ('PENDING', 'RUNNING');
-- ListOperations: newest first, keyset on (created_at, id).
CREATE INDEX operations_created ON operations (created_at DESC, id DESC);
CREATE INDEX operations_device ON operations (device_id, created_at DESC) WHERE device_id IS NOT NULL;
CREATE INDEX operations_group ON operations (group_id);

-- +goose Down
DROP TABLE operations;
