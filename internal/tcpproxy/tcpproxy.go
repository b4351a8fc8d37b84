// Package tcpproxy is a small TCP load balancer and fault injector for
// loopback tests and the demo: it spreads new connections round-robin over
// backends that accept them (skipping dead ones), and can cut every open
// connection (RST/FIN, as a network failure or a load balancer restart would)
// or freeze them (stop forwarding without closing, as a black-holed route
// would) on command, and can close connections that carry no byte for an
// idle timeout, as cloud load balancers do.
package tcpproxy

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from its listener to one of its backends.
type Proxy struct {
	ln      net.Listener
	log     *slog.Logger
	mu      sync.Mutex
	backs   []string
	next    int
	conns   map[*pair]struct{}
	frozen  bool
	refuse  bool
	closed  bool
	dialTO  time.Duration
	accepts int
	idle    time.Duration // 0: never close idle connections
	idleCut int
}

type pair struct {
	client, backend net.Conn
	last            atomic.Int64 // unix nanoseconds of the last byte either way
}

// New listens on addr (e.g. "127.0.0.1:0") and forwards to backends
// (host:port). It serves until Close.
func New(addr string, backends []string, log *slog.Logger) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Proxy{ln: ln, log: log, backs: backends, conns: map[*pair]struct{}{}, dialTO: 2 * time.Second}
	go p.serve()
	return p, nil
}

// Addr is the proxy's listen address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetBackends replaces the backend list for new connections.
func (p *Proxy) SetBackends(b []string) {
	p.mu.Lock()
	p.backs = append([]string(nil), b...)
	p.mu.Unlock()
}

// Accepted returns how many client connections were forwarded so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Cut closes every open connection (both sides). New connections still work.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.client.Close()
		c.backend.Close()
		delete(p.conns, c)
	}
}

// Freeze stops forwarding bytes on every connection, open and new, without
// closing anything (no FIN, no RST) until Thaw. Use it to test keepalives.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Thaw resumes forwarding after Freeze.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
}

// SetIdleTimeout makes the proxy close (both sides of) every connection,
// open or new, that forwards no byte in either direction for d, as a load
// balancer's idle timeout does (AWS ALB and many others: 60 s by default);
// d = 0 turns it off. The check runs every d/10 (at least every 10 ms).
func (p *Proxy) SetIdleTimeout(d time.Duration) {
	p.mu.Lock()
	p.idle = d
	p.mu.Unlock()
}

// IdleCuts returns how many connections the idle timeout closed so far.
func (p *Proxy) IdleCuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleCut
}

// Refuse makes the proxy close new connections at once (a down load
// balancer) until Refuse(false).
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Close stops the listener and cuts every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	return err
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.log.Warn("tcpproxy accept", "err", err)
			continue
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	p.mu.Lock()
	refuse := p.refuse || p.closed
	backs := append([]string(nil), p.backs...)
	start := p.next
	p.next++
	p.mu.Unlock()
	if refuse || len(backs) == 0 {
		client.Close()
		return
	}
	var backend net.Conn
	for i := range backs {
		addr := backs[(start+i)%len(backs)]
		b, err := net.DialTimeout("tcp", addr, p.dialTO)
		if err == nil {
			backend = b
			break
		}
		p.log.Debug("tcpproxy backend down", "backend", addr, "err", err)
	}
	if backend == nil {
		client.Close()
		return
	}
	pr := &pair{client: client, backend: backend}
	pr.last.Store(time.Now().UnixNano())
	p.mu.Lock()
	p.conns[pr] = struct{}{}
	p.accepts++
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(pr, backend, client); done <- struct{}{} }()
	go func() { p.pipe(pr, client, backend); done <- struct{}{} }()
	stop := make(chan struct{})
	go p.watchIdle(pr, stop)
	<-done
	close(stop)
	client.Close()
	backend.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// watchIdle closes pr once it has been idle for the idle timeout, until stop.
func (p *Proxy) watchIdle(pr *pair, stop <-chan struct{}) {
	for {
		p.mu.Lock()
		idle := p.idle
		p.mu.Unlock()
		every := max(idle/10, 10*time.Millisecond)
		if idle <= 0 {
			every = 100 * time.Millisecond
		}
		select {
		case <-stop:
			return
		case <-time.After(every):
		}
		if idle > 0 && time.Since(time.Unix(0, pr.last.Load())) >= idle {
			p.mu.Lock()
			p.idleCut++
			p.mu.Unlock()
			p.log.Debug("tcpproxy: idle timeout", "idle", idle)
			pr.client.Close()
			pr.backend.Close()
			return
		}
	}
}

// pipe copies src → dst, holding bytes while the proxy is frozen, and
// records activity on pr.
func (p *Proxy) pipe(pr *pair, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 {
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			if !frozen {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			pr.last.Store(time.Now().UnixNano())
		}
		if err != nil {
			return
		}
	}
}
