-- +goose Up

-- Operators name devices by their Ironic node name: FleetService requests
-- that take device_name look a device up by name (equality), and
-- ListDevices filters by name prefix and pattern (LIKE 'prefix%'), both
-- served by this index whatever the database's collation.
CREATE INDEX devices_name ON devices (name text_pattern_ops, site);

-- +goose Down
DROP INDEX devices_name;
