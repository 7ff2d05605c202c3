package agent

// A change's waiting client (docs/agent.md, "Deadlines and cancel"): the
// client of a SYNC Set waits for the device's answer, so its deadline and
// its cancel reach the device, as they would directly. Its change's device
// Set carries the client's remaining deadline (capped by ApplyTimeout)
// less ClientMargin, and is cancelled when the client gives up; a change
// whose client gave up before its Set was sent is withdrawn, never sent.
// Held in memory from the proposal until its apply finishes: a proposal
// whose client a restart lost is applied as an acknowledged one.

import (
	"context"
	"maps"
	"sync"
	"time"
)

// ClientMargin is how much sooner than its client's deadline a change's
// device Set must be answered, so that the answer still reaches the client
// in time: the sidecar records it and replies. It is 50 ms, or a tenth of
// the time left when that is under 500 ms.
func ClientMargin(left time.Duration) time.Duration {
	return min(left/10, 50*time.Millisecond)
}

// waitingClient is the client of a change waiting for its device's answer.
type waitingClient struct {
	// deadline is the client's (zero: none).
	deadline time.Time

	mu sync.Mutex
	// gone is why the client gave up (ClientGone), nil while it waits.
	gone error
	// abort cancels the device Set carrying the change while one is in
	// flight (changeContext), nil otherwise.
	abort *context.CancelFunc
}

type waitingKey struct{}

// WithWaitingClient marks ctx, a client's, for a change proposed with it
// (ProposeChange, ProposeConfirmedChange) whose client waits for the
// device's answer (SYNC): its deadline goes with the change's device Set.
// The client's giving up reaches the agent through ClientGone.
func WithWaitingClient(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitingKey{}, true)
}

// waitingClientOf returns the waiting client ctx marks, nil if none.
func waitingClientOf(ctx context.Context) *waitingClient {
	if on, _ := ctx.Value(waitingKey{}).(bool); !on {
		return nil
	}
	c := &waitingClient{}
	c.deadline, _ = ctx.Deadline()
	return c
}

// giveUp records that the client gave up, for reason err (nil:
// context.Canceled), and cancels the device Set in flight with its
// change, if any. The first reason stays.
func (c *waitingClient) giveUp(err error) {
	if err == nil {
		err = context.Canceled
	}
	c.mu.Lock()
	if c.gone != nil {
		c.mu.Unlock()
		return
	}
	c.gone = err
	abort := c.abort
	c.mu.Unlock()
	if abort != nil {
		(*abort)()
	}
}

// watch has abort called when the client gives up, at once if it has:
// abort cancels a device Set with the client's change. unwatch, once the
// Set is answered, stops it.
func (c *waitingClient) watch(abort *context.CancelFunc) {
	c.mu.Lock()
	gone := c.gone != nil
	if !gone {
		c.abort = abort
	}
	c.mu.Unlock()
	if gone {
		(*abort)()
	}
}

// unwatch undoes watch(abort), unless a later watch replaced it.
func (c *waitingClient) unwatch(abort *context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.abort == abort {
		c.abort = nil
	}
}

// gaveUp returns why the client gave up (context.Canceled, or
// context.DeadlineExceeded once its deadline passed), nil while it waits.
func (c *waitingClient) gaveUp(now time.Time) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	gone := c.gone
	c.mu.Unlock()
	if gone != nil {
		return gone
	}
	if !c.deadline.IsZero() && !now.Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// holdClient keeps c as proposal i's waiting client.
func (a *Agent) holdClient(i uint64, c *waitingClient) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients[i] = c
}

// releaseClient forgets c as proposal i's client if it still is (see
// releaseCredentials).
func (a *Agent) releaseClient(i uint64, c *waitingClient) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.clients[i] == c {
		delete(a.clients, i)
	}
}

// client returns proposal i's waiting client, nil if none.
func (a *Agent) client(i uint64) *waitingClient {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clients[i]
}

// dropClients forgets the clients of proposals up to i (finished).
func (a *Agent) dropClients(i uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	deleteThrough(a.clients, i)
}

// deleteThrough deletes the entries of m, by proposal index, up to i.
func deleteThrough[V any](m map[uint64]V, i uint64) {
	maps.DeleteFunc(m, func(k uint64, _ V) bool { return k <= i })
}

// ClientGone tells the agent that the waiting client of proposal i gave
// up, for reason err (its context's error: canceled or deadline
// exceeded): a Set of it at the device is cancelled, and one not yet sent
// is withdrawn.
func (a *Agent) ClientGone(i uint64, err error) {
	if c := a.client(i); c != nil {
		c.giveUp(err)
	}
}

// changeContext is the context of the device Set of proposals
// first..last under session s: it ends after ApplyTimeout, or sooner with
// the earliest deadline of their waiting clients less ClientMargin, and
// when one of those clients gives up.
func (a *Agent) changeContext(s *session, first, last uint64) (context.Context, context.CancelFunc) {
	now := time.Now()
	deadline := now.Add(a.opts.ApplyTimeout)
	var waiting []*waitingClient
	for i := first; i <= last; i++ {
		c := a.client(i)
		if c == nil {
			continue
		}
		waiting = append(waiting, c)
		if !c.deadline.IsZero() {
			if d := c.deadline.Add(-ClientMargin(c.deadline.Sub(now))); d.Before(deadline) {
				deadline = d
			}
		}
	}
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	abort := &cancel
	for _, c := range waiting {
		c.watch(abort)
	}
	return ctx, func() {
		for _, c := range waiting {
			c.unwatch(abort)
		}
		cancel()
	}
}
