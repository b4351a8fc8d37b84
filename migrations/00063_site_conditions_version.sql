-- +goose Up

-- A site's conditions version (issue 26 item 2): bumped by every write of
-- the site's device conditions that does not come through its link's
-- group committer (hub/store writeHealth: health reports, health expiry,
-- the hub's own HardwareMatchesProfile verdicts). The replica holding the
-- site's link keeps the site's current conditions in memory and uses them
-- only while the version it read under the site's lock is the one they
-- were kept at (hub/store/groupcache.go, docs/design/performance.md).
ALTER TABLE sites ADD COLUMN conditions_version bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sites DROP COLUMN conditions_version;
