package journal

import (
	"context"
	"testing"
	"time"
)

// TestUpdateLingeringSharesTheNextRequestsTransaction: a lingering update
// waits for the next request and commits with it, in one transaction; alone,
// it commits once its linger is over.
func TestUpdateLingeringSharesTheNextRequestsTransaction(t *testing.T) {
	j := openTest(t, t.TempDir(), Options{})
	ctx := context.Background()
	noop := func(*Tx) error { return nil }

	// A linger far longer than the test: only the proposal can end it.
	before := j.Transactions()
	lingered := make(chan error, 1)
	queued := make(chan struct{})
	go func() {
		lingered <- j.UpdateLingering(ctx, time.Hour, noop, func() { close(queued) })
	}()
	<-queued
	p, err := j.ProposeChange(ctx, []*Op{update(t, "/a/b", "v")})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-lingered; err != nil {
		t.Fatal(err)
	}
	if n := j.Transactions() - before; n != 1 {
		t.Errorf("a lingering update and the proposal queued behind it took %d transactions, want 1", n)
	}
	if got, err := j.Proposal(ctx, p.GetIndex()); err != nil || got.GetChange().GetCommit() != StatusPending {
		t.Errorf("proposal %d after the shared transaction: %v, %v", p.GetIndex(), got, err)
	}

	// Alone, it commits after its linger.
	before = j.Transactions()
	if err := j.UpdateLingering(ctx, 10*time.Millisecond, noop, nil); err != nil {
		t.Fatal(err)
	}
	if n := j.Transactions() - before; n != 1 {
		t.Errorf("a lingering update alone took %d transactions, want 1", n)
	}
}
