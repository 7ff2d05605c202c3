// Package relay is a fault-injecting TCP relay for tests: it listens on a
// loopback port and forwards every connection to a target address, and it
// can break the network between the two ends the ways a real network
// breaks:
//
//   - Cut closes every relayed connection (both ends see the close);
//   - Partition does the same and refuses every new connection (accepted
//     and closed at once) until Heal;
//   - BlackHole stops forwarding bytes in both directions while the
//     connections stay open, as a link that silently drops every packet
//     would; TCP retransmits, so bytes held during the black hole are
//     delivered, in order, once it heals (Heal), unless an end gives up
//     and closes first;
//   - SetLatency delays every chunk of bytes forwarded.
//
// SetTarget moves the relay to another target (a server restarted on
// another port), so that clients keep one address.
//
// A sidecar pointed at a Relay's Addr instead of its device meets these
// faults on its southbound connection (the chaos test of cmd/gnmi-sidecar).
package relay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Stats counts what a Relay did.
type Stats struct {
	// Accepted counts the connections relayed to the target.
	Accepted int
	// Refused counts the connections closed at once: during a partition,
	// or because the target refused them.
	Refused int
	// Cut counts the relayed connections closed by Cut or Partition.
	Cut int
}

// Relay forwards TCP connections from its loopback address to a target and
// injects faults into them. Its methods are safe for concurrent use.
type Relay struct {
	ln net.Listener

	mu          sync.Mutex
	target      string
	conns       map[*pair]struct{}
	partitioned bool
	healed      chan struct{} // open while black-holed, closed by Heal
	latency     time.Duration
	closed      bool
	stats       Stats

	wg sync.WaitGroup // the accept loop and every pair's goroutines
}

// pair is one relayed connection: the client's end and the target's.
type pair struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed when the pair is closed
}

func (p *pair) close() {
	p.once.Do(func() {
		close(p.done)
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

// dialTimeout bounds the connection to the target.
const dialTimeout = 5 * time.Second

// New starts a relay on 127.0.0.1 (a free port) to target.
func New(target string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	r := &Relay{ln: ln, target: target, conns: make(map[*pair]struct{})}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr returns the address clients connect to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Target returns the address the relay forwards new connections to.
func (r *Relay) Target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target
}

// SetTarget makes the relay forward new connections to target (a server
// that moved: restarted on another port); relayed connections stay as
// they are.
func (r *Relay) SetTarget(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target = target
}

// Stats returns the relay's counts so far.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Cut closes every connection being relayed and returns how many it
// closed. New connections are relayed as before.
func (r *Relay) Cut() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cutLocked()
}

func (r *Relay) cutLocked() int {
	n := len(r.conns)
	for p := range r.conns {
		p.close()
		delete(r.conns, p)
	}
	r.stats.Cut += n
	return n
}

// Partition cuts every connection and refuses new ones until Heal.
func (r *Relay) Partition() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partitioned = true
	r.cutLocked()
}

// BlackHole stops forwarding bytes, in both directions, until Heal; the
// connections stay open and new ones are accepted (and connected to the
// target), but carry nothing either.
func (r *Relay) BlackHole() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.healed == nil {
		r.healed = make(chan struct{})
	}
}

// SetLatency delays every chunk of bytes forwarded by d (0: none).
func (r *Relay) SetLatency(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = d
}

// Heal ends a partition and a black hole (the bytes a black hole held are
// then forwarded). Latency stays as set.
func (r *Relay) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partitioned = false
	if r.healed != nil {
		close(r.healed)
		r.healed = nil
	}
}

// Close stops the relay: it stops accepting, closes every connection and
// waits for its goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	err := r.ln.Close()
	r.cutLocked()
	if r.healed != nil {
		close(r.healed)
		r.healed = nil
	}
	r.mu.Unlock()
	r.wg.Wait()
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed (a loopback listener has no other lasting error)
		}
		r.mu.Lock()
		refuse := r.partitioned || r.closed
		if refuse {
			r.stats.Refused++
		}
		r.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		r.wg.Add(1)
		go r.relay(c)
	}
}

// relay connects client to the target and forwards bytes both ways until
// either end closes or the relay cuts the pair.
func (r *Relay) relay(client net.Conn) {
	defer r.wg.Done()
	server, err := net.DialTimeout("tcp", r.Target(), dialTimeout)
	if err != nil {
		_ = client.Close()
		r.mu.Lock()
		r.stats.Refused++
		r.mu.Unlock()
		return
	}
	p := &pair{client: client, server: server, done: make(chan struct{})}
	r.mu.Lock()
	if r.partitioned || r.closed {
		r.stats.Refused++
		r.mu.Unlock()
		p.close()
		return
	}
	r.conns[p] = struct{}{}
	r.stats.Accepted++
	r.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.forward(p, client, server) }()
	go func() { defer wg.Done(); r.forward(p, server, client) }()
	wg.Wait()
	p.close()
	r.mu.Lock()
	delete(r.conns, p)
	r.mu.Unlock()
}

// forward copies src to dst, chunk by chunk, through the relay's faults.
// The end of src (EOF) is passed on as a half-close; any other error, on
// either side, closes the pair.
func (r *Relay) forward(p *pair, src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.gate(p) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.close()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			if tc, ok := dst.(*net.TCPConn); ok && tc.CloseWrite() == nil {
				return
			}
			p.close()
			return
		}
		if err != nil {
			p.close()
			return
		}
	}
}

// gate holds a chunk while the relay is black-holed and delays it by the
// latency; it returns false if the pair was closed meanwhile.
func (r *Relay) gate(p *pair) bool {
	for {
		r.mu.Lock()
		healed, latency := r.healed, r.latency
		r.mu.Unlock()
		if healed == nil {
			if latency > 0 {
				t := time.NewTimer(latency)
				defer t.Stop()
				select {
				case <-t.C:
				case <-p.done:
					return false
				}
			}
			return true
		}
		select {
		case <-healed:
		case <-p.done:
			return false
		}
	}
}
