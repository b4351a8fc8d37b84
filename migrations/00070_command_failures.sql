-- +goose Up

-- A command's failures (FAILED results of its satellite), apart from its
-- attempts (every send, link-cut resends included): the retry back-off of
-- a FAILED command doubles per failure, not per send, so a command resent
-- a few times across link cuts and then failed once (Placement down) waits
-- --command-failure-backoff, not minutes (docs/design/link.md).
ALTER TABLE commands ADD COLUMN failures integer NOT NULL DEFAULT 0;
UPDATE commands SET failures = 1 WHERE state = 'FAILED';

-- +goose Down
ALTER TABLE commands DROP COLUMN failures;
