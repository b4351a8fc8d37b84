-- +goose Up

-- The 32-labels-per-device limit applies to a device's merged labels
-- (issue 22; docs/reference/labels.md "Keys and values"): the satellite's
-- (facts->'labels', at most 32: the hub refuses more) with the labels
-- file's over them (migration 00027) may exceed it. When they do, the
-- file's labels are kept first, then the satellite's, each in byte order
-- of their keys, up to 32; the rest are dropped (and counted: the hub's
-- ironlink_hub_devices_labels_capped, from
-- ironlink_device_labels_uncapped).

-- ironlink_device_labels_uncapped is the merged set before the limit.
CREATE FUNCTION ironlink_device_labels_uncapped(p_site text, p_name text, p_id uuid, p_facts jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(CASE WHEN jsonb_typeof(p_facts->'labels') = 'object' THEN p_facts->'labels' END, '{}'::jsonb)
        || COALESCE((SELECT jsonb_object_agg(e.key, e.value ORDER BY f.pos)
                     FROM device_file_labels f, jsonb_each(f.labels) e
                     WHERE f.device_id = p_id
                        OR (f.device_id IS NULL AND f.site = p_site AND p_name LIKE f.name_like)), '{}'::jsonb)
$$;

-- ironlink_device_labels is a device's effective labels: as before, with
-- at most 32 (the file's first). Without file labels it is the satellite's
-- set as it is (no counting: the common case stays cheap).
CREATE OR REPLACE FUNCTION ironlink_device_labels(p_site text, p_name text, p_id uuid, p_facts jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN x.file = '{}'::jsonb THEN x.sat
        WHEN (SELECT count(*) FROM jsonb_object_keys(x.sat || x.file)) <= 32 THEN x.sat || x.file
        ELSE (SELECT jsonb_object_agg(c.key, c.value) FROM (
                SELECT u.key, u.value FROM (
                    SELECT f.key, f.value, 0 AS src FROM jsonb_each(x.file) f
                    UNION ALL
                    SELECT s.key, s.value, 1 FROM jsonb_each(x.sat) s WHERE NOT x.file ? s.key) u
                ORDER BY u.src, u.key COLLATE "C" LIMIT 32) c)
    END
    FROM (SELECT COALESCE(CASE WHEN jsonb_typeof(p_facts->'labels') = 'object' THEN p_facts->'labels' END, '{}'::jsonb) AS sat,
                 COALESCE((SELECT jsonb_object_agg(e.key, e.value ORDER BY f.pos)
                           FROM device_file_labels f, jsonb_each(f.labels) e
                           WHERE f.device_id = p_id
                              OR (f.device_id IS NULL AND f.site = p_site AND p_name LIKE f.name_like)), '{}'::jsonb) AS file) x
$$;

-- +goose Down
CREATE OR REPLACE FUNCTION ironlink_device_labels(p_site text, p_name text, p_id uuid, p_facts jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(CASE WHEN jsonb_typeof(p_facts->'labels') = 'object' THEN p_facts->'labels' END, '{}'::jsonb)
        || COALESCE((SELECT jsonb_object_agg(e.key, e.value ORDER BY f.pos)
                     FROM device_file_labels f, jsonb_each(f.labels) e
                     WHERE f.device_id = p_id
                        OR (f.device_id IS NULL AND f.site = p_site AND p_name LIKE f.name_like)), '{}'::jsonb)
$$;
DROP FUNCTION ironlink_device_labels_uncapped(text, text, uuid, jsonb);
