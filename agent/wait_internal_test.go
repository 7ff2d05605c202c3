package agent

import (
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// TestWaitingClientsWakeOnTheirOwnNews: a client waiting for its
// proposal is woken by what may end its wait (the agent's progress
// passing it, the device accepting it) and by nothing about later
// proposals; a missed wake-up would leave it waiting for the retry period.
func TestWaitingClientsWakeOnTheirOwnNews(t *testing.T) {
	a := &Agent{waiting: map[uint64]chan struct{}{}, accepted: map[uint64]*journal.Proposal{}, changed: make(chan struct{})}
	woken := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	five, six, seven := a.waitingOn(5), a.waitingOn(6), a.waitingOn(7)
	if a.waitingOn(5) != five {
		t.Fatal("two waiters of one proposal sleep on different channels")
	}

	a.noteCommitted(4)
	a.noteApplied(4)
	if woken(five) || woken(six) || woken(seven) {
		t.Fatal("progress up to 4 woke a waiter of 5, 6 or 7")
	}
	a.noteCommitted(5)
	if !woken(five) || woken(six) {
		t.Fatalf("commits up to 5: waiter of 5 woken %v (want true), of 6 %v (want false)", woken(five), woken(six))
	}
	a.noteApplied(6)
	if !woken(six) || woken(seven) {
		t.Fatalf("applies up to 6: waiter of 6 woken %v (want true), of 7 %v (want false)", woken(six), woken(seven))
	}
	a.accept([]*journal.Proposal{{Index: 7, Change: &journal.Change{}}})
	if !woken(seven) {
		t.Fatal("the device accepting 7 did not wake its waiter")
	}
	if len(a.waiting) != 0 {
		t.Fatalf("%d channels kept after their waiters were woken", len(a.waiting))
	}
	// A waiter that comes after the news sleeps on a new channel, and
	// finds the news itself (passed, acceptedChange) before sleeping.
	if woken(a.waitingOn(5)) {
		t.Fatal("a new waiter of 5 starts woken")
	}
}
