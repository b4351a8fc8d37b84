-- +goose Up

-- Issue 26 item 4, reads at 1,000,000 devices (docs/design/performance.md
-- "Reads at a million devices"):
--
-- devices_name_id serves the fleet view's device list, ordered by name
-- then id (its default) with keyset paging: the first page and every later
-- one read the index in order and stop at the page, instead of sorting
-- every device (devices_name is text_pattern_ops, for LIKE prefixes, and
-- cannot give the list's order).
CREATE INDEX devices_name_id ON devices (name, id);

-- devices_site_id serves ListDevices and the CLI's `get devices` of one
-- site in device-id order (keyset paging on id), now and as_of: the site's
-- devices in page order, so a page reads the page and no more of the site
-- (without it a site's as_of page walked the primary key past 100 devices
-- of other sites for each of its own; not partial, since an as_of listing
-- includes devices removed since).
CREATE INDEX devices_site_id ON devices (site, id);

-- +goose Down
DROP INDEX devices_site_id;
DROP INDEX devices_name_id;
