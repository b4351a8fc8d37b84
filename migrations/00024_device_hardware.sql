-- +goose Up

-- Each device's hardware as its satellite last read it from Ironic's
-- inventory and BIOS settings (ironlink.v1.HardwareState as protobuf JSON,
-- at most 16 KiB; docs/reference/conditions.md "Hardware"), and every
-- state received (the satellite sends one on its first poll of a node and
-- after each inspection, so the history grows by inspections, not polls).
-- updated_at orders the hub's profile check (hub/hwprofile): devices whose
-- hardware arrived since its last pass are checked again.
CREATE TABLE device_hardware (
    device_id              uuid        PRIMARY KEY REFERENCES devices (id),
    hardware               jsonb       NOT NULL,
    inspection_finished_at timestamptz,
    read_at                timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX device_hardware_updated ON device_hardware (updated_at);

CREATE TABLE device_hardware_history (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id   uuid        NOT NULL REFERENCES devices (id),
    hardware    jsonb       NOT NULL,
    read_at     timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX device_hardware_history_device ON device_hardware_history (device_id, read_at DESC);

-- +goose Down
DROP TABLE device_hardware_history;
DROP TABLE device_hardware;
