-- +goose Up

-- Each check's result of a validation run, as MAAS records script results:
-- name, outcome, duration, the end of the output and a link to artifacts.
-- A check recorded again while its run is open replaces its row.
CREATE TABLE validation_results (
    run_id         uuid        NOT NULL REFERENCES validation_runs (id),
    check_name     text        NOT NULL,
    result         text        NOT NULL CHECK (result IN ('PASS', 'FAIL')),
    duration_ms    bigint      NOT NULL DEFAULT 0,
    output_excerpt text        NOT NULL DEFAULT '',
    artifacts_url  text        NOT NULL DEFAULT '',
    reporter       text        NOT NULL DEFAULT '',
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, check_name)
);

-- +goose Down
DROP TABLE validation_results;
