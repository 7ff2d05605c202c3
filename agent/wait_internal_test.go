package agent

import (
	"testing"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// TestWaitingClientsWakeOnTheirOwnNews: a client waiting for its
// proposal is woken by what may end its wait (the agent's progress
// passing it, the device accepting it) and by nothing about later
// proposals, nor, waiting for the device, by commits; a missed wake-up
// would leave it waiting for the retry period.
func TestWaitingClientsWakeOnTheirOwnNews(t *testing.T) {
	a := &Agent{waiting: newWaiters(), accepted: map[uint64]*journal.Proposal{}, changed: make(chan struct{})}
	woken := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	five, six, seven := a.waitingOn(5, true), a.waitingOn(6, true), a.waitingOn(7, true)
	if a.waitingOn(5, true) != five {
		t.Fatal("two waiters of one proposal sleep on different channels")
	}
	fiveCommit, sixCommit := a.waitingOn(5, false), a.waitingOn(6, false)

	a.noteCommitted(4)
	a.noteApplied(4)
	if woken(five) || woken(six) || woken(seven) || woken(fiveCommit) || woken(sixCommit) {
		t.Fatal("progress up to 4 woke a waiter of 5, 6 or 7")
	}
	a.noteCommitted(6)
	if !woken(fiveCommit) || !woken(sixCommit) {
		t.Fatal("commits up to 6 did not wake the waiters of the commits of 5 and 6")
	}
	if woken(five) || woken(six) {
		t.Fatal("commits up to 6 woke a waiter of the apply of 5 or 6: only news of applies can end that wait")
	}
	a.noteApplied(5)
	if !woken(five) || woken(six) {
		t.Fatalf("applies up to 5: waiter of 5 woken %v (want true), of 6 %v (want false)", woken(five), woken(six))
	}
	sevenCommit := a.waitingOn(7, false)
	a.noteApplied(7)
	if !woken(six) || !woken(seven) || !woken(sevenCommit) {
		t.Fatal("applies up to 7 did not wake the waiters of 6 and 7, of their applies and commits")
	}
	eight := a.waitingOn(8, true)
	a.accept([]*journal.Proposal{{Index: 8, Change: &journal.Change{}}})
	if !woken(eight) {
		t.Fatal("the device accepting 8 did not wake its waiter")
	}
	if n := len(a.waiting.commit) + len(a.waiting.apply); n != 0 {
		t.Fatalf("%d channels kept after their waiters were woken", n)
	}
	// A waiter that comes after the news sleeps on a new channel, and
	// finds the news itself (passed, acceptedChange) before sleeping.
	if woken(a.waitingOn(5, true)) {
		t.Fatal("a new waiter of 5 starts woken")
	}
}
