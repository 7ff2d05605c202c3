package relay

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// echoServer accepts connections on loopback and echoes every line back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newRelay(t *testing.T, target string) *Relay {
	t.Helper()
	r, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func connect(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and returns the echo, or the error of reading it
// within d.
func (c *client) roundTrip(line string, d time.Duration) (string, error) {
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return c.read(d)
}

func (c *client) read(d time.Duration) (string, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return s[:len(s)-1], nil
}

func mustEcho(t *testing.T, c *client, line string) {
	t.Helper()
	got, err := c.roundTrip(line, 10*time.Second)
	if err != nil || got != line {
		t.Fatalf("echo of %q: %q, %v", line, got, err)
	}
}

func TestRelayForwards(t *testing.T) {
	r := newRelay(t, echoServer(t))
	if r.Target() == r.Addr() {
		t.Fatal("relay listens on its target's address")
	}
	a, b := connect(t, r.Addr()), connect(t, r.Addr())
	mustEcho(t, a, "hello")
	mustEcho(t, b, "world")
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	mustEcho(t, a, string(big))
	if s := r.Stats(); s.Accepted != 2 || s.Refused != 0 || s.Cut != 0 {
		t.Errorf("stats %+v; want 2 accepted", s)
	}
}

// A client's half-close reaches the server, and the server's answer still
// comes back.
func TestRelayHalfClose(t *testing.T) {
	r := newRelay(t, echoServer(t))
	c := connect(t, r.Addr())
	if _, err := c.c.Write([]byte("last words\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c.r)
	if err != nil || string(b) != "last words\n" {
		t.Fatalf("after a half-close: %q, %v; want the echo, then EOF", b, err)
	}
}

func TestRelayCut(t *testing.T) {
	r := newRelay(t, echoServer(t))
	a, b := connect(t, r.Addr()), connect(t, r.Addr())
	mustEcho(t, a, "one")
	mustEcho(t, b, "two")
	if n := r.Cut(); n != 2 {
		t.Fatalf("Cut closed %d connections; want 2", n)
	}
	for _, c := range []*client{a, b} {
		if _, err := c.read(10 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Errorf("read after Cut: %v; want EOF", err)
		}
	}
	// New connections work at once.
	mustEcho(t, connect(t, r.Addr()), "three")
	if s := r.Stats(); s.Cut != 2 || s.Accepted != 3 {
		t.Errorf("stats %+v; want 3 accepted, 2 cut", s)
	}
}

func TestRelayPartition(t *testing.T) {
	r := newRelay(t, echoServer(t))
	a := connect(t, r.Addr())
	mustEcho(t, a, "before")
	r.Partition()
	if _, err := a.read(10 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("read after Partition: %v; want EOF", err)
	}
	// A new connection is accepted by the kernel, then closed unanswered.
	b := connect(t, r.Addr())
	if got, err := b.roundTrip("during", 10*time.Second); err == nil {
		t.Errorf("echo %q through a partition", got)
	}
	r.Heal()
	mustEcho(t, connect(t, r.Addr()), "after")
	if s := r.Stats(); s.Refused != 1 || s.Cut != 1 || s.Accepted != 2 {
		t.Errorf("stats %+v; want 2 accepted, 1 refused, 1 cut", s)
	}
}

func TestRelayBlackHole(t *testing.T) {
	r := newRelay(t, echoServer(t))
	a := connect(t, r.Addr())
	mustEcho(t, a, "before")
	r.BlackHole()
	b := connect(t, r.Addr()) // accepted, but carries nothing either
	for _, c := range []*client{a, b} {
		if got, err := c.roundTrip("held", 300*time.Millisecond); !isTimeout(err) {
			t.Fatalf("through a black hole: %q, %v; want a timeout", got, err)
		}
	}
	r.Heal()
	// The held bytes arrive, on the same connections.
	for _, c := range []*client{a, b} {
		if got, err := c.read(10 * time.Second); err != nil || got != "held" {
			t.Fatalf("after Heal: %q, %v; want the held line", got, err)
		}
		mustEcho(t, c, "after")
	}
	if s := r.Stats(); s.Cut != 0 || s.Accepted != 2 {
		t.Errorf("stats %+v; want 2 accepted, none cut", s)
	}
}

// Cut ends a black hole's connections too, and Close ends held ones.
func TestRelayCutDuringBlackHole(t *testing.T) {
	r := newRelay(t, echoServer(t))
	a := connect(t, r.Addr())
	r.BlackHole()
	if _, err := a.roundTrip("held", 100*time.Millisecond); !isTimeout(err) {
		t.Fatalf("through a black hole: %v; want a timeout", err)
	}
	r.Cut()
	if _, err := a.read(10 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("read after Cut: %v; want EOF", err)
	}
	b := connect(t, r.Addr())
	if _, err := b.roundTrip("held", 100*time.Millisecond); !isTimeout(err) {
		t.Fatalf("through a black hole: %v; want a timeout", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on a black-holed connection")
	}
	if _, err := b.read(10 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("read after Close: %v; want EOF", err)
	}
}

func TestRelayLatency(t *testing.T) {
	r := newRelay(t, echoServer(t))
	a := connect(t, r.Addr())
	const d = 100 * time.Millisecond
	r.SetLatency(d)
	start := time.Now()
	mustEcho(t, a, "slow")
	// Both directions are delayed: at least 2d (a lower bound only; the
	// machine may be slower still).
	if took := time.Since(start); took < 2*d {
		t.Errorf("round trip took %v with latency %v each way", took, d)
	}
	r.SetLatency(0)
	mustEcho(t, a, "fast")
}

func TestRelaySetTarget(t *testing.T) {
	r := newRelay(t, echoServer(t))
	a := connect(t, r.Addr())
	mustEcho(t, a, "first")
	other := echoServer(t)
	r.SetTarget(other)
	if r.Target() != other {
		t.Fatalf("Target() = %s after SetTarget(%s)", r.Target(), other)
	}
	mustEcho(t, a, "still the first") // a relayed connection stays
	mustEcho(t, connect(t, r.Addr()), "second")
}

func TestRelayTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	r := newRelay(t, target)
	c := connect(t, r.Addr())
	if got, err := c.roundTrip("anyone?", 10*time.Second); err == nil {
		t.Fatalf("echo %q from a target that is down", got)
	}
	if s := r.Stats(); s.Refused != 1 {
		t.Errorf("stats %+v; want 1 refused", s)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isReset(err error) bool {
	var se *os.SyscallError
	return errors.As(err, &se)
}
