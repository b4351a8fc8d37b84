-- +goose Up

-- Release restores (issue 25): a quarantine records what it took, release
-- gives exactly that back, and several sources may hold one device.
-- docs/reference/api.md "Quarantine holds and release" describes it.

-- A release of a device that was not offered before its quarantine: the
-- quarantine ends and CUSTOM_CUSTOMER_READY is left as it is (absent).
ALTER TABLE devices DROP CONSTRAINT devices_desired_impairment_check;
ALTER TABLE devices ADD CONSTRAINT devices_desired_impairment_check
    CHECK (desired_impairment IN ('NONE', 'QUARANTINED', 'RELEASED', 'RELEASED_UNOFFERED'));
ALTER TABLE commands DROP CONSTRAINT commands_desired_check;
ALTER TABLE commands ADD CONSTRAINT commands_desired_check
    CHECK (desired IN ('QUARANTINED', 'RELEASED', 'RELEASED_UNOFFERED'));

-- What the current quarantine took, recorded when its first hold was
-- added: whether the device was offered to customers (desired RELEASED or
-- CustomerReady True; NULL: not known, released as not offered) and its
-- operational_status then.
ALTER TABLE devices ADD COLUMN pre_quarantine_offered boolean;
ALTER TABLE devices ADD COLUMN pre_quarantine_status text NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN pre_quarantine_at timestamptz;

-- The sources keeping a device quarantined: 'operator' (every operator
-- and API client share one hold) or 'policy:<rule>'. A device's desired
-- impairment is QUARANTINED exactly while it has a hold.
CREATE TABLE quarantine_holds (
    device_id   uuid        NOT NULL REFERENCES devices (id),
    holder      text        NOT NULL,
    actor       text        NOT NULL,
    reason      text        NOT NULL,
    source      text        NOT NULL,
    -- The desired generation of the quarantine that added the hold.
    generation  bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, holder)
);

-- What a command or history entry did: QUARANTINE, RELEASE (a hold
-- released), RELEASE_ALL_HOLDS, OFFER; '' for entries written before
-- this migration. holder: the hold added or released.
ALTER TABLE commands ADD COLUMN action text NOT NULL DEFAULT '';
ALTER TABLE commands ADD COLUMN holder text NOT NULL DEFAULT '';
ALTER TABLE impairment_history ADD COLUMN action text NOT NULL DEFAULT '';
ALTER TABLE impairment_history ADD COLUMN holder text NOT NULL DEFAULT '';

-- Devices quarantined before this migration get one hold, named after the
-- source of the newest quarantine (the policy's rule, else 'operator'),
-- and what that quarantine took as the stored histories tell it: offered
-- when the newest CustomerReady change before the episode began was True
-- or the desired state before it was RELEASED; NULL (released as not
-- offered, `ironlink offer` gives it back) when the history does not say.
WITH q AS (
    SELECT d.id, d.desired_generation,
        (SELECT min(h.changed_at) FROM impairment_history h
          WHERE h.device_id = d.id AND h.desired = 'QUARANTINED'
            AND h.id > COALESCE((SELECT max(r.id) FROM impairment_history r
                                  WHERE r.device_id = d.id AND r.desired <> 'QUARANTINED'), 0)) AS began
    FROM devices d WHERE d.desired_impairment = 'QUARANTINED'
), last AS (
    SELECT q.id, q.desired_generation, COALESCE(q.began, now()) AS began, c.actor, c.reason, c.source,
        COALESCE((SELECT pd.rule FROM policy_decisions pd WHERE pd.command_id = c.id),
                 (SELECT pa.rule FROM policy_pending_actions pa WHERE pa.command_id = c.id)) AS rule
    FROM q
    LEFT JOIN commands c ON c.device_id = q.id AND c.generation = q.desired_generation
)
INSERT INTO quarantine_holds (device_id, holder, actor, reason, source, generation, created_at)
SELECT id,
    CASE WHEN source = 'policy' THEN 'policy:' || COALESCE(NULLIF(rule, ''), 'unknown') ELSE 'operator' END,
    COALESCE(actor, 'unknown'), COALESCE(reason, ''), COALESCE(source, ''), desired_generation, began
FROM last;

UPDATE devices d SET pre_quarantine_at = h.created_at,
    pre_quarantine_offered = (
        SELECT bool_or(x) FROM (
            SELECT (SELECT ch.status = 'True' FROM condition_history ch
                     WHERE ch.device_id = d.id AND ch.type = 'CustomerReady' AND ch.recorded_at < h.created_at
                     ORDER BY ch.recorded_at DESC, ch.id DESC LIMIT 1) AS x
            UNION ALL
            SELECT (SELECT ih.desired = 'RELEASED' FROM impairment_history ih
                     WHERE ih.device_id = d.id AND ih.changed_at < h.created_at
                     ORDER BY ih.id DESC LIMIT 1) AS x) o),
    pre_quarantine_status = COALESCE((
        SELECT sh.status FROM status_history sh
        WHERE sh.device_id = d.id AND sh.changed_at < h.created_at AND sh.status <> 'QUARANTINED'
        ORDER BY sh.changed_at DESC, sh.id DESC LIMIT 1), '')
FROM quarantine_holds h WHERE h.device_id = d.id;

-- +goose Down
-- Going back, a release that left the trait alone becomes "never touched"
-- (left alone as well), and its commands are closed: older code would
-- read them as releases that add the trait.
UPDATE devices SET desired_impairment = 'NONE' WHERE desired_impairment = 'RELEASED_UNOFFERED';
UPDATE commands SET state = CASE WHEN state IN ('PENDING', 'SENT', 'FAILED') THEN 'SUPERSEDED' ELSE state END,
    desired = 'RELEASED' WHERE desired = 'RELEASED_UNOFFERED';
ALTER TABLE impairment_history DROP COLUMN holder;
ALTER TABLE impairment_history DROP COLUMN action;
ALTER TABLE commands DROP COLUMN holder;
ALTER TABLE commands DROP COLUMN action;
DROP TABLE quarantine_holds;
ALTER TABLE devices DROP COLUMN pre_quarantine_at;
ALTER TABLE devices DROP COLUMN pre_quarantine_status;
ALTER TABLE devices DROP COLUMN pre_quarantine_offered;
ALTER TABLE commands DROP CONSTRAINT commands_desired_check;
ALTER TABLE commands ADD CONSTRAINT commands_desired_check CHECK (desired IN ('QUARANTINED', 'RELEASED'));
ALTER TABLE devices DROP CONSTRAINT devices_desired_impairment_check;
ALTER TABLE devices ADD CONSTRAINT devices_desired_impairment_check
    CHECK (desired_impairment IN ('NONE', 'QUARANTINED', 'RELEASED'));
