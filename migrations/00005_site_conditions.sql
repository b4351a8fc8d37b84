-- +goose Up

-- Current site-level conditions (OpenStackAuthenticated, OrphanDetection):
-- one row per site and condition type. Each SiteConditions message from the
-- site's link replaces the site's set (Store.ReplaceSiteConditions).
CREATE TABLE site_conditions (
    site                 text        NOT NULL REFERENCES sites (name),
    type                 text        NOT NULL,
    status               text        NOT NULL CHECK (status IN ('True', 'False', 'Unknown')),
    reason               text        NOT NULL,
    message              text        NOT NULL DEFAULT '',
    last_transition_time timestamptz NOT NULL,
    observed_time        timestamptz NOT NULL,
    PRIMARY KEY (site, type)
);

-- +goose Down
DROP TABLE site_conditions;
