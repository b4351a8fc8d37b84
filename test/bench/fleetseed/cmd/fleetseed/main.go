// Command fleetseed creates a PostgreSQL database and fills it with a
// generated fleet (package fleetseed) for the read benchmarks:
//
//	go run ./test/bench/fleetseed/cmd/fleetseed -db ironlink_bench_million
//
// The server is -server-url (default IRONLINK_TEST_DATABASE_URL, else
// DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres); the
// database -db must not exist. BenchmarkMillionReads (test/bench) reuses it
// with -bench.million-db.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/ironlink/ironlink/test/bench/fleetseed"
)

func main() {
	sh := fleetseed.Million
	server := flag.String("server-url", serverURL(), "PostgreSQL server URL (any database; the new one is created beside it)")
	db := flag.String("db", "ironlink_bench_million", "database to create and fill")
	flag.IntVar(&sh.Sites, "sites", sh.Sites, "sites")
	flag.IntVar(&sh.DevicesPerSite, "devices-per-site", sh.DevicesPerSite, "devices per site")
	flag.IntVar(&sh.CondHistoryPerDevice, "condition-history", sh.CondHistoryPerDevice, "condition_history rows per device")
	flag.IntVar(&sh.StatusHistoryPerDevice, "status-history", sh.StatusHistoryPerDevice, "status_history rows per device")
	flag.IntVar(&sh.Weeks, "weeks", sh.Weeks, "weeks of history (one partition each)")
	flag.Parse()
	ctx := context.Background()
	url, err := fleetseed.CreateDatabase(ctx, *server, *db)
	if err == nil {
		_, err = fleetseed.Seed(ctx, url, sh, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetseed:", err)
		os.Exit(1)
	}
	fmt.Println(url)
}

func serverURL() string {
	for _, k := range []string{"IRONLINK_TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}
