// Command ironlink is the operator CLI for an ironlink hub; see hub/ctl and
// `ironlink --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironlink/ironlink/hub/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Execute(ctx, ctl.Options{}, os.Args[1:])
	stop()
	os.Exit(code)
}
