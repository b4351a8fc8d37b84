-- +goose Up

-- The policy evaluator's leadership epoch (hub/policyrun): the replica
-- that takes the evaluator's advisory lock bumps epoch, under the
-- exclusive fence lock, before its first pass; every write of a pass
-- takes the fence lock shared and checks epoch is still the one its
-- replica bumped to (store.WithPolicyFence), so a replica that resumes
-- after losing the lead (a SIGSTOP longer than
-- idle_in_transaction_session_timeout) writes nothing.
CREATE TABLE policy_leader (
    id        int         PRIMARY KEY CHECK (id = 1),
    epoch     bigint      NOT NULL,
    -- The replica that bumped epoch, and when.
    holder    text        NOT NULL,
    since     timestamptz NOT NULL
);
INSERT INTO policy_leader (id, epoch, holder, since) VALUES (1, 0, '', now());

-- +goose Down
DROP TABLE policy_leader;
