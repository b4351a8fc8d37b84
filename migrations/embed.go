// Package migrations embeds the hub's SQL schema migrations, applied in file
// name order by goose (github.com/pressly/goose/v3) at hub start-up and by
// `ironlink-hub migrate`. Files are NNNNN_name.sql with goose Up/Down blocks;
// never edit a migration that has shipped, add a new one.
package migrations

import "embed"

// FS holds every *.sql migration of this directory.
//
//go:embed *.sql
var FS embed.FS
