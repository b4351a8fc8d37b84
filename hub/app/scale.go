package app

import (
	"log/slog"
	"syscall"

	"google.golang.org/grpc"
)

// Per-connection memory of the gRPC server, sized for links (one satellite
// per connection, one stream each, up to 10,000 on a replica) rather than
// for bulk transfers: at the library's defaults each connection holds a
// 32 KiB read buffer and a 32 KiB write buffer for its whole life, and BDP
// estimation may grow a stream's window (the data the hub accepts ahead of
// reading it) towards 16 MiB.
const (
	// LinkStreamWindow is each stream's HTTP/2 flow-control window: what a
	// satellite may send ahead of the hub's reading (a link's loop stops
	// reading when its queues are full, so this bounds what waits in memory
	// per link). Setting it turns BDP window growth off. A message larger
	// than the window still arrives: gRPC widens the window for it while it
	// is read.
	LinkStreamWindow = 256 << 10
	// LinkConnWindow is each connection's window (a link's connection
	// carries one stream).
	LinkConnWindow = 256 << 10
	// LinkReadBuffer is each connection's read buffer.
	LinkReadBuffer = 4 << 10
	// LinkWriteBuffer is each connection's write buffer, taken from a
	// shared pool while a write is being flushed and returned after (the
	// library's default shared write buffer), so an idle link holds none.
	LinkWriteBuffer = 16 << 10
)

// linkTransportOptions are the server options that bound a connection's
// memory (see LinkStreamWindow and the constants beside it).
func linkTransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(LinkStreamWindow),
		grpc.InitialConnWindowSize(LinkConnWindow),
		grpc.ReadBufferSize(LinkReadBuffer),
		grpc.WriteBufferSize(LinkWriteBuffer),
		// The write buffer is shared (pooled while not flushing) by
		// default since grpc-go 1.7x; the option is deprecated.
	}
}

// raiseOpenFileLimit raises the process's soft limit on open files
// (RLIMIT_NOFILE) to its hard limit — each link is a connection, each
// connection a file descriptor; the usual soft default of 1024 caps a
// replica near a thousand links — and logs both. A failure is logged and
// the hub runs on with the limit it has. The hard limit is the operator's
// (systemd LimitNOFILE=, the container runtime's ulimit); see
// docs/design/architecture.md "Open files and memory per link".
func raiseOpenFileLimit(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("read the open-file limit", "err", err)
		return
	}
	before := lim.Cur
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("raise the open-file soft limit to the hard limit", "soft", before, "hard", lim.Max, "err", err)
			return
		}
	}
	log.Info("open-file limit", "soft", lim.Cur, "hard", lim.Max, "soft_before", before)
}
