package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with itself.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestIdleTimeoutClosesOnlyIdleConnections: a connection that sends a byte
// more often than the idle timeout stays open; one that stays silent is
// closed once, and counted.
func TestIdleTimeoutClosesOnlyIdleConnections(t *testing.T) {
	p, err := New("127.0.0.1:0", []string{echoServer(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetIdleTimeout(300 * time.Millisecond)
	busy, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	quiet, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	r := bufio.NewReader(busy)
	for range 10 { // 1 s of traffic every 100 ms
		if _, err := busy.Write([]byte("ping\n")); err != nil {
			t.Fatalf("busy connection cut: %v", err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("busy connection cut: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = quiet.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := quiet.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte from a connection the proxy should have closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("idle connection still open after 5 s")
	}
	if n := p.IdleCuts(); n != 1 {
		t.Fatalf("%d idle cuts, want 1", n)
	}
}
