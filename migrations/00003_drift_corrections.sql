-- +goose Up

-- Corrections made by the satellites' impairment resync (append-only).
CREATE TABLE drift_corrections (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    device_id     uuid        NOT NULL REFERENCES devices (id),
    generation    bigint      NOT NULL,
    detail        text        NOT NULL,
    corrected_at  timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX drift_corrections_device ON drift_corrections (device_id, id);

ALTER TABLE devices
    ADD COLUMN drift_corrections        bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_drift_correction    text   NOT NULL DEFAULT '',
    ADD COLUMN last_drift_correction_at timestamptz;

-- +goose Down
ALTER TABLE devices
    DROP COLUMN last_drift_correction_at,
    DROP COLUMN last_drift_correction,
    DROP COLUMN drift_corrections;
DROP TABLE drift_corrections;
