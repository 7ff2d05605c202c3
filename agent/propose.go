package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// ProposeChange journals ops as a new proposal (journal.ProposeChange) and,
// in the same transaction, takes the steps it enables at once (see
// advance), then wakes the reconcilers. Proposed this way, a Set costs one
// fsync before it goes to the device instead of three.
func (a *Agent) ProposeChange(ctx context.Context, by journal.Sender, ops []*journal.Op) (*journal.Proposal, error) {
	return a.propose(ctx, func(then func(*journal.Tx) error) (*journal.Proposal, error) {
		return a.j.ProposeChangeBy(ctx, by, ops, then)
	})
}

// ProposeAdoption is ProposeChange for values the device already holds
// (journal.ProposeAdoption): applied without a device Set.
func (a *Agent) ProposeAdoption(ctx context.Context, by journal.Sender, ops []*journal.Op) (*journal.Proposal, error) {
	return a.propose(ctx, func(then func(*journal.Tx) error) (*journal.Proposal, error) {
		return a.j.ProposeAdoption(ctx, by, ops, then)
	})
}

// ProposeBaseline is ProposeAdoption for one proposal of a baseline: the
// device's configuration in scopes, as read from it
// (journal.ProposeBaseline).
func (a *Agent) ProposeBaseline(ctx context.Context, by journal.Sender, scopes []*gpb.Path, ops []*journal.Op, part journal.BaselinePart) (*journal.Proposal, error) {
	return a.propose(ctx, func(then func(*journal.Tx) error) (*journal.Proposal, error) {
		return a.j.ProposeBaseline(ctx, by, scopes, ops, part, then)
	})
}

// ProposeRestore is ProposeChange for the change that goes back to a
// point of the journal (journal.ProposeRestore).
func (a *Agent) ProposeRestore(ctx context.Context, by journal.Sender, pt journal.Point) (*journal.Proposal, error) {
	return a.propose(ctx, func(then func(*journal.Tx) error) (*journal.Proposal, error) {
		return a.j.ProposeRestore(ctx, by, pt, then)
	})
}

// ProposeConfirmedChange is ProposeChange for a commit-confirmed change
// (journal.ProposeConfirmedChange).
func (a *Agent) ProposeConfirmedChange(ctx context.Context, by journal.Sender, ops []*journal.Op, id string, deadline time.Time) (*journal.Proposal, error) {
	return a.propose(ctx, func(then func(*journal.Tx) error) (*journal.Proposal, error) {
		return a.j.ProposeConfirmedChange(ctx, by, ops, id, deadline, then)
	})
}

func (a *Agent) propose(ctx context.Context, journalIt func(then func(*journal.Tx) error) (*journal.Proposal, error)) (*journal.Proposal, error) {
	var committed bool
	var held uint64
	md, client := a.clientMetadata(credentialsFrom(ctx)), waitingClientOf(ctx)
	release := func() {
		if md != nil {
			a.releaseCredentials(held, md)
		}
		if client != nil {
			a.releaseClient(held, client)
		}
	}
	p, err := journalIt(func(tx *journal.Tx) (err error) {
		// The journal may run this again (alone, after a transaction it
		// shared failed): decide afresh each time.
		if md != nil || client != nil {
			// Held before the transaction is durable: the applier may send
			// the proposal as soon as it is. A run before this one held
			// them under the index it was given.
			if held != 0 {
				release()
			}
			c, err := tx.Configuration()
			if err != nil {
				return err
			}
			held = c.GetLastIndex()
			if md != nil {
				a.holdCredentials(held, md)
			}
			if client != nil {
				a.holdClient(held, client)
			}
		}
		committed, err = a.advance(tx)
		return err
	})
	if err != nil {
		if held != 0 {
			release() // the index will be another proposal's
		}
		return nil, err
	}
	if committed {
		// Every earlier commit is finished (the guard): nothing for the
		// committer to do, the applier may have a start to send.
		a.noteCommitted(p.GetIndex())
		poke(a.applyWake)
		a.broadcast()
		return p, nil
	}
	a.Notify()
	return p, nil
}

// advance runs inside the transaction that journaled a new proposal and
// takes the journal-only steps the proposal enables at once: its commit
// (spec CommitChange) if every earlier commit is finished, and then the
// applier's StartApply (see startApplyIn). What it does not take, the
// committer and the applier take later. committed reports whether it
// committed the proposal.
func (a *Agent) advance(tx *journal.Tx) (committed bool, err error) {
	v, err := a.txView(tx)
	if err != nil {
		return false, err
	}
	i := v.Config.GetLastIndex()
	p, err := txProposal(tx, i)
	if err != nil {
		return false, err
	}
	prev, err := txProposal(tx, i-1)
	if err != nil {
		return false, err
	}
	if CommitChange(v, p, prev).Kind != StepCommitChange {
		return false, nil
	}
	if _, _, err := tx.CommitChange(i); err != nil {
		if errors.Is(err, journal.ErrGuard) {
			return false, nil
		}
		return false, err
	}
	return true, a.startApplyIn(tx)
}

// startApplyIn takes spec ApplyChange's first step inside tx if the state
// enables it: the oldest proposal whose apply is not finished is started
// when it is committed, every earlier apply is finished and the device is
// synced for the current term. The send itself is the applier's.
func (a *Agent) startApplyIn(tx *journal.Tx) error {
	v, err := a.txView(tx)
	if err != nil {
		return err
	}
	if v.Config.GetRollingBack() != 0 || !v.synced() {
		return nil
	}
	next, prev, err := oldest(v.Config, v.Config.GetApplied().GetProposal(), unfinishedApply,
		func(i uint64) (*journal.Proposal, error) { return txProposal(tx, i) })
	if err != nil {
		return err
	}
	step := ApplyChange(v, next, prev)
	if step.Kind != StepStartApply {
		return nil
	}
	if _, _, err := tx.StartApply(step.Index); err != nil && !errors.Is(err, journal.ErrGuard) {
		return err
	}
	return nil
}

// commitRun commits proposal i and the pending proposals after it, up to
// maxBatchProposals, in one transaction (spec CommitChange, once per
// proposal in index order). If they do not fit in one transaction, i is
// committed alone; if it does not fit even alone, its commit fails (spec
// CommitChange, invalid branch) rather than block every later proposal.
func (a *Agent) commitRun(ctx context.Context, i uint64, log *slog.Logger) error {
	var last uint64
	err := a.j.Update(ctx, func(tx *journal.Tx) error {
		last = 0
		for k := i; k < i+maxBatchProposals; k++ {
			if k > i {
				p, err := txProposal(tx, k)
				if err != nil {
					return err
				}
				if p == nil {
					break // the journal's guard ends the run at any other proposal
				}
			}
			if _, _, err := tx.CommitChange(k); err != nil {
				if k > i && errors.Is(err, journal.ErrGuard) {
					break
				}
				return err
			}
			last = k
		}
		return a.startApplyIn(tx)
	})
	if errors.Is(err, journal.ErrTooLarge) {
		last = i
		_, _, err = a.j.CommitChange(ctx, i)
	}
	if errors.Is(err, journal.ErrTooLarge) {
		log.Warn("proposal too large to commit", "err", err)
		_, _, err = a.j.FailCommit(ctx, i, uint32(codes.ResourceExhausted),
			"the change touches more paths than one journal transaction holds: "+err.Error())
	}
	if err == nil {
		a.noteCommitted(last)
	}
	return err
}

// txView is view inside a transaction.
func (a *Agent) txView(tx *journal.Tx) (View, error) {
	c, err := tx.Configuration()
	if err != nil {
		return View{}, err
	}
	m, err := tx.Mastership()
	if err != nil {
		return View{}, err
	}
	return View{Config: c, Mastership: m, Link: a.link(), Policy: a.policy()}, nil
}

// txProposal is Agent.proposalStatus inside a transaction.
func txProposal(tx *journal.Tx, i uint64) (*journal.Proposal, error) {
	if i == 0 {
		return nil, nil
	}
	p, err := tx.ProposalStatus(i)
	if errors.Is(err, journal.ErrNotFound) || errors.Is(err, journal.ErrCompacted) {
		return nil, nil
	}
	return p, err
}

// --- progress and waiting ---

// noteCommitted records that every proposal up to i has its commit
// finished.
func (a *Agent) noteCommitted(i uint64) {
	a.mu.Lock()
	a.progress.committed = max(a.progress.committed, i)
	wakeLocked(a.waiting.commit, i)
	a.mu.Unlock()
}

// noteApplied records that every proposal up to i has its change's apply
// finished.
func (a *Agent) noteApplied(i uint64) {
	a.mu.Lock()
	a.progress.applied = max(a.progress.applied, i)
	a.wakeAllLocked(i) // an apply finished, its commit is too
	a.mu.Unlock()
	a.dropCredentials(i)
	a.dropClients(i)
}

// passed reports whether the progress the agent has seen covers proposal
// i's commit (or apply, if applied).
func (a *Agent) passed(i uint64, applied bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if applied {
		return a.progress.applied >= i
	}
	return a.progress.committed >= i
}

// WaitChange blocks until proposal i's change is finished as far as the
// client of a Set is concerned: its apply (the device answered, or the
// apply failed or was aborted) if applied is set, else its commit. It
// returns the proposal as it then was, or ctx's error: once the device
// accepted it, as applied even before the journal records that (see
// completeBatch; Settle waits for the record). It reads the journal only
// when the agent's progress has passed i (and once per resync period), so
// many waiters cost little.
func (a *Agent) WaitChange(ctx context.Context, i uint64, applied bool) (*journal.Proposal, error) {
	return a.WaitChangeUntil(ctx, nil, i, applied)
}

// WaitChangeUntil is WaitChange that also ends, with ErrWaitStopped, once
// stop is closed: a server that ends its clients' waits when it shuts
// down passes its own channel, rather than deriving a context for every
// wait.
func (a *Agent) WaitChangeUntil(ctx context.Context, stop <-chan struct{}, i uint64, applied bool) (*journal.Proposal, error) {
	done := func(p *journal.Proposal) bool {
		if applied {
			return journal.Finished(p.GetChange().GetApply())
		}
		return journal.Finished(p.GetChange().GetCommit())
	}
	var early func() *journal.Proposal
	if applied {
		early = func() *journal.Proposal { return a.acceptedChange(i) }
	}
	changes := func() <-chan struct{} { return a.waitingOn(i, applied) }
	return a.wait(ctx, stop, i, statusDone(done), changes, func() bool { return a.passed(i, applied) }, early)
}
