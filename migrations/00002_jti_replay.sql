-- +goose Up

-- Client-assertion ids (JWT "jti", RFC 7519 §4.1.7) the hub has accepted,
-- kept until the assertion expires, so that a token is accepted at most once
-- across all replicas (RFC 7523 §3 item 7). Written by every authenticated
-- RPC; expired rows are deleted by Store.PurgeExpiredJTIs.
CREATE TABLE jti_replay (
    client_id   text        NOT NULL,
    jti         text        NOT NULL,
    -- The assertion's exp plus the verifier's clock leeway.
    expires_at  timestamptz NOT NULL,
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, jti)
);
CREATE INDEX jti_replay_expires ON jti_replay (expires_at);

-- +goose Down
DROP TABLE jti_replay;
