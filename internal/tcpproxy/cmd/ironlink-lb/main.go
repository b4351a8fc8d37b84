// Command ironlink-lb is a tiny TCP load balancer for the demo and local
// tests: `ironlink-lb --listen localhost:7070 --backend 127.0.0.1:7071
// --backend 127.0.0.1:7072` spreads connections round-robin over the
// backends that accept them. It is not a production load balancer.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ironlink/ironlink/internal/tcpproxy"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	listen := flag.String("listen", "localhost:7070", "listen address")
	var backends list
	flag.Var(&backends, "backend", "backend host:port (repeat)")
	flag.Parse()
	if len(backends) == 0 {
		fmt.Fprintln(os.Stderr, "ironlink-lb: at least one --backend is required")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p, err := tcpproxy.New(*listen, backends, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ironlink-lb:", err)
		os.Exit(1)
	}
	log.Info("load balancer listening", "listen", p.Addr(), "backends", backends)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	_ = p.Close()
}
