-- +goose Up
-- Issue 22: a per-label guard (guard.perLabel) that trips holds only the
-- devices carrying that label value (a rack), not the whole site: its
-- tripped state is kept per (site, label, value) here, beside the site
-- guard's in policy_site_state. A row is a tripped domain; re-arming
-- deletes it (hub/policyrun, once no action it held is pending and one
-- more quarantine fits its limits).
CREATE TABLE policy_domain_trips (
    site          text        NOT NULL REFERENCES sites (name),
    label         text        NOT NULL,
    value         text        NOT NULL,
    tripped_since timestamptz NOT NULL,
    rule          text        NOT NULL DEFAULT '',
    detail        text        NOT NULL DEFAULT '',
    PRIMARY KEY (site, label, value)
);

-- +goose Down
DROP TABLE policy_domain_trips;
