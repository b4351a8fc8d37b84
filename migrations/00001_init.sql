-- +goose Up

-- One row per site that has ever connected.
CREATE TABLE sites (
    name               text PRIMARY KEY,
    -- Highest batch sequence committed for the site.
    last_sequence      bigint      NOT NULL DEFAULT 0,
    -- Last time anything arrived on the site's link.
    last_seen_at       timestamptz,
    -- Fencing epoch: incremented for every new link; the newest link wins.
    link_epoch         bigint      NOT NULL DEFAULT 0,
    -- Replica holding the link, NULL when none.
    link_replica       text,
    link_connected_at  timestamptz,
    boot_id            text        NOT NULL DEFAULT '',
    satellite_version  text        NOT NULL DEFAULT '',
    capabilities       text[]      NOT NULL DEFAULT '{}',
    -- Whether the site was last judged stale (silent for longer than stale_after).
    stale              boolean     NOT NULL DEFAULT false,
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- One row per Ironic node (device), kept after removal.
CREATE TABLE devices (
    id                  uuid PRIMARY KEY,
    site                text        NOT NULL REFERENCES sites (name),
    name                text        NOT NULL DEFAULT '',
    facts               jsonb       NOT NULL DEFAULT '{}',
    removed             boolean     NOT NULL DEFAULT false,
    removed_at          timestamptz,
    -- Snapshot that last mentioned the device (see SnapshotPart in link.proto).
    snapshot_id         text,
    first_seen_at       timestamptz NOT NULL DEFAULT now(),
    observed_at         timestamptz,
    status              text        NOT NULL DEFAULT 'UNKNOWN',
    status_reason       text        NOT NULL DEFAULT 'NeverReported',
    status_changed_at   timestamptz NOT NULL DEFAULT now(),
    -- Status before the site became unreachable.
    last_known_status   text,
    -- Desired impairment: NONE (never touched), QUARANTINED or RELEASED.
    desired_impairment  text        NOT NULL DEFAULT 'NONE'
        CHECK (desired_impairment IN ('NONE', 'QUARANTINED', 'RELEASED')),
    desired_generation  bigint      NOT NULL DEFAULT 0,
    applied_generation  bigint      NOT NULL DEFAULT 0,
    last_command_error  text        NOT NULL DEFAULT ''
);
CREATE INDEX devices_site_status ON devices (site, status, id);
CREATE INDEX devices_status ON devices (status, id);

-- Current conditions: one row per device and condition type.
CREATE TABLE device_conditions (
    device_id            uuid        NOT NULL REFERENCES devices (id),
    type                 text        NOT NULL,
    status               text        NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),
    reason               text        NOT NULL,
    message              text        NOT NULL DEFAULT '',
    last_transition_time timestamptz NOT NULL,
    observed_time        timestamptz NOT NULL,
    observed_generation  bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (device_id, type)
);

-- Append-only: every change of a condition's status, reason or message.
CREATE TABLE condition_history (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id            uuid        NOT NULL REFERENCES devices (id),
    type                 text        NOT NULL,
    status               text        NOT NULL,
    reason               text        NOT NULL,
    message              text        NOT NULL DEFAULT '',
    last_transition_time timestamptz NOT NULL,
    observed_time        timestamptz NOT NULL,
    recorded_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX condition_history_device ON condition_history (device_id, id);

-- Append-only: every operational_status change.
CREATE TABLE status_history (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id   uuid        NOT NULL REFERENCES devices (id),
    status      text        NOT NULL,
    reason      text        NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX status_history_device ON status_history (device_id, id);

-- Quarantine/release commands: desired state with a per-device generation.
CREATE TABLE commands (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    device_id     uuid        NOT NULL REFERENCES devices (id),
    site          text        NOT NULL REFERENCES sites (name),
    generation    bigint      NOT NULL,
    desired       text        NOT NULL CHECK (desired IN ('QUARANTINED', 'RELEASED')),
    state         text        NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'SENT', 'SUCCEEDED', 'FAILED', 'SUPERSEDED')),
    actor         text        NOT NULL,
    reason        text        NOT NULL,
    source        text        NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text        NOT NULL DEFAULT '',
    result_detail text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    sent_at       timestamptz,
    completed_at  timestamptz,
    UNIQUE (device_id, generation)
);
CREATE INDEX commands_open ON commands (site, state) WHERE state IN ('PENDING', 'SENT', 'FAILED');
CREATE INDEX commands_created ON commands (created_at DESC, id);

-- Append-only: who quarantined or released what, when, why and from where.
CREATE TABLE impairment_history (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id   uuid        NOT NULL REFERENCES devices (id),
    desired     text        NOT NULL,
    generation  bigint      NOT NULL,
    actor       text        NOT NULL,
    reason      text        NOT NULL,
    source      text        NOT NULL,
    command_id  uuid        NOT NULL REFERENCES commands (id),
    changed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX impairment_history_device ON impairment_history (device_id, id);

-- +goose Down
DROP TABLE impairment_history;
DROP TABLE commands;
DROP TABLE status_history;
DROP TABLE condition_history;
DROP TABLE device_conditions;
DROP TABLE devices;
DROP TABLE sites;
