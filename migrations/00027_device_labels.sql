-- +goose Up

-- Failure-domain labels (issue 22 item 5; docs/reference/labels.md).
-- A device's labels are those its satellite maps from Ironic fields (kept
-- in devices.facts->'labels', sent with the other facts) overlaid by the
-- hub's labels file (--labels-file), whose entries this table holds in
-- file order: every replica that (re)loads the file replaces the rows in
-- one transaction. An entry names one device by id, or the devices of a
-- site whose name matches a LIKE pattern; later entries win per key.
CREATE TABLE device_file_labels (
    pos       integer PRIMARY KEY,
    site      text    NOT NULL DEFAULT '',
    name_like text    NOT NULL DEFAULT '',
    device_id uuid,
    labels    jsonb   NOT NULL
);

-- ironlink_device_labels is a device's effective labels: the satellite's
-- (facts->'labels') with the file's entries over them.
CREATE FUNCTION ironlink_device_labels(p_site text, p_name text, p_id uuid, p_facts jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(CASE WHEN jsonb_typeof(p_facts->'labels') = 'object' THEN p_facts->'labels' END, '{}'::jsonb)
        || COALESCE((SELECT jsonb_object_agg(e.key, e.value ORDER BY f.pos)
                     FROM device_file_labels f, jsonb_each(f.labels) e
                     WHERE f.device_id = p_id
                        OR (f.device_id IS NULL AND f.site = p_site AND p_name LIKE f.name_like)), '{}'::jsonb)
$$;

-- +goose Down
DROP FUNCTION ironlink_device_labels(text, text, uuid, jsonb);
DROP TABLE device_file_labels;
