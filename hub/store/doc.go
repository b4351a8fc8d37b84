// Package store is the hub's PostgreSQL persistence (pgx v5): sites and their
// links, devices, current conditions, condition/status/impairment histories
// and quarantine/release commands. Every write that a link acks happens in one
// transaction; schema changes live in ../../migrations and are applied by
// Migrate (goose) before anything else touches the database.
//
// Errors: ErrNotFound, ErrFenced and ErrWrongSite are returned wrapped; test
// with errors.Is. Everything else is a database error wrapped with context.
package store
