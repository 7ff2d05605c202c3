package journal

import "time"

// The guards of the spec's actions (ConfigImpl), as pure predicates over
// the records: each returns nil if the action is enabled, else an error
// wrapping ErrGuard that says why. Each guard has this one home: the
// journal checks it inside the transaction that records the action, so a
// decision made on a stale read is refused, never half-applied; the agent
// decides with the same predicate. A proposal's predecessor prev is nil
// when there is none or retention dropped it (retention keeps only
// finished proposals).

// CommitChangeGuard guards CommitChange and FailCommit of proposal p (spec
// CommitChange): its commit is pending, no rollback is under way and
// prev's commit is Finished.
func CommitChangeGuard(c *Configuration, p, prev *Proposal) error {
	i := p.GetIndex()
	switch {
	case p.GetPhase() != PhaseChange:
		return guardf("commit proposal %d: it is being rolled back", i)
	case p.GetChange().GetCommit() != StatusPending:
		return guardf("commit proposal %d: commit is %v, not pending", i, p.GetChange().GetCommit())
	case c.GetRollingBack() != 0:
		return guardf("commit proposal %d: rollback of proposal %d is in progress", i, c.GetRollingBack())
	}
	return previousFinished(i, prev, "commit", commitStatus)
}

// StartApplyGuard guards StartApply of proposal p (spec ApplyChange, first
// branch): the device is synced for the current term, p is committed, does
// not depend on a failed apply, no rollback is under way and prev's apply
// is Finished. The re-entry for the proposal already in progress is
// enabled too (it writes nothing).
func StartApplyGuard(c *Configuration, m *Mastership, p, prev *Proposal) error {
	i := p.GetIndex()
	if err := syncedGuard(c, m, "apply proposal", i); err != nil {
		return err
	}
	switch ch := p.GetChange(); {
	case p.GetPhase() != PhaseChange:
		return guardf("apply proposal %d: it is being rolled back", i)
	case ch.GetCommit() != StatusComplete:
		return guardf("apply proposal %d: commit is %v, not complete", i, ch.GetCommit())
	case ch.GetAbortedBy() != 0:
		return guardf("apply proposal %d: it depends on proposal %d, which failed to apply: its apply is aborted", i, ch.GetAbortedBy())
	case ch.GetApply() == StatusInProgress && c.GetApplied().GetProposal() == i:
		return nil // re-entry after a transient failure
	case ch.GetApply() != StatusPending:
		return guardf("apply proposal %d: apply is %v, not pending", i, ch.GetApply())
	case c.GetRollingBack() != 0:
		return guardf("apply proposal %d: rollback of proposal %d is in progress", i, c.GetRollingBack())
	}
	return previousFinished(i, prev, "apply", applyStatus)
}

// CompleteApplyGuard guards CompleteApply of proposal p sent under term
// (spec ApplyChange, success branch): p's apply is in progress, the device
// is synced and the term has not moved since.
func CompleteApplyGuard(c *Configuration, m *Mastership, p *Proposal, term uint64) error {
	i := p.GetIndex()
	if err := FailApplyGuard(c, p); err != nil {
		return guardf("complete apply of proposal %d: apply is %v, not in progress", i, p.GetChange().GetApply())
	}
	if err := syncedGuard(c, m, "complete apply of proposal", i); err != nil {
		return err
	}
	if term != c.GetApplied().GetTerm() {
		return guardf("complete apply of proposal %d: applied under term %d, current term is %d", i, term, c.GetApplied().GetTerm())
	}
	return nil
}

// FailApplyGuard guards FailApply of proposal p (spec ApplyChange, failure
// branch): p's apply is in progress.
func FailApplyGuard(c *Configuration, p *Proposal) error {
	if p.GetPhase() != PhaseChange || p.GetChange().GetApply() != StatusInProgress || c.GetApplied().GetProposal() != p.GetIndex() {
		return guardf("fail apply of proposal %d: apply is %v, not in progress", p.GetIndex(), p.GetChange().GetApply())
	}
	return nil
}

// AbortApplyGuard guards AbortApply of proposal p (spec ApplyChange,
// aborted branch): its apply is pending, its commit failed or was aborted
// or it depends on a proposal that failed to apply, and prev's apply is
// Finished.
func AbortApplyGuard(p, prev *Proposal) error {
	i, ch := p.GetIndex(), p.GetChange()
	if ch.GetApply() != StatusPending {
		return guardf("abort apply of proposal %d: apply is %v, not pending", i, ch.GetApply())
	}
	if ch.GetCommit() != StatusFailed && ch.GetCommit() != StatusAborted && ch.GetAbortedBy() == 0 {
		return guardf("abort apply of proposal %d: commit is %v, not failed or aborted", i, ch.GetCommit())
	}
	return previousFinished(i, prev, "apply", applyStatus)
}

// CommitRollbackGuard guards CommitRollback of proposal p (spec
// CommitRollback): it is the rollback under way, not committed yet, of the
// newest committed change.
func CommitRollbackGuard(c *Configuration, p *Proposal) error {
	i, rb := p.GetIndex(), p.GetRollback()
	switch {
	case p.GetPhase() != PhaseRollback || rb.GetCommit() != StatusPending:
		return guardf("commit rollback of proposal %d: rollback commit is %v, not pending", i, rb.GetCommit())
	case c.GetCommitted().GetIndex() != i || c.GetRollingBack() != i:
		return guardf("commit rollback of proposal %d: committed index is %d", i, c.GetCommitted().GetIndex())
	}
	return nil
}

// StartApplyRollbackGuard guards StartApplyRollback of proposal p (spec
// ApplyRollback, first branches): the device is synced, the rollback is
// committed and p is the newest applied change. The re-entry for the
// rollback already in progress is enabled too (it writes nothing).
func StartApplyRollbackGuard(c *Configuration, m *Mastership, p *Proposal) error {
	i, rb := p.GetIndex(), p.GetRollback()
	if err := syncedGuard(c, m, "apply rollback of proposal", i); err != nil {
		return err
	}
	switch {
	case p.GetPhase() != PhaseRollback || rb.GetCommit() != StatusComplete:
		return guardf("apply rollback of proposal %d: rollback commit is %v, not complete", i, rb.GetCommit())
	case c.GetApplied().GetIndex() != i:
		return guardf("apply rollback of proposal %d: applied index is %d", i, c.GetApplied().GetIndex())
	case rb.GetApply() == StatusInProgress:
		return nil // re-entry after a transient failure
	case rb.GetApply() != StatusPending:
		return guardf("apply rollback of proposal %d: rollback apply is %v, not pending", i, rb.GetApply())
	}
	return nil
}

// FinishApplyRollbackGuard guards CompleteApplyRollback and
// FailApplyRollback of proposal p sent under term (spec ApplyRollback,
// last branches): the rollback's apply is in progress, the device is
// synced and the term has not moved since.
func FinishApplyRollbackGuard(c *Configuration, m *Mastership, p *Proposal, term uint64) error {
	i, rb := p.GetIndex(), p.GetRollback()
	if p.GetPhase() != PhaseRollback || rb.GetApply() != StatusInProgress || c.GetApplied().GetIndex() != i {
		return guardf("complete rollback apply of proposal %d: rollback apply is %v, not in progress", i, rb.GetApply())
	}
	if err := syncedGuard(c, m, "complete rollback apply of proposal", i); err != nil {
		return err
	}
	if term != c.GetApplied().GetTerm() {
		return guardf("complete rollback apply of proposal %d: applied under term %d, current term is %d", i, term, c.GetApplied().GetTerm())
	}
	return nil
}

// ReconcileGuard guards StartReconcile for term (spec
// ReconcileConfiguration, first branch): term is the mastership term and
// newer than the applied term.
func ReconcileGuard(c *Configuration, m *Mastership, term uint64) error {
	if term != m.GetTerm() || term <= c.GetApplied().GetTerm() {
		return guardf("re-push for term %d: mastership term is %d, applied term %d", term, m.GetTerm(), c.GetApplied().GetTerm())
	}
	return nil
}

// CompleteReconcileGuard guards CompleteReconcile for term (spec
// ReconcileConfiguration, second branch): ReconcileGuard, and the re-push
// is in progress.
func CompleteReconcileGuard(c *Configuration, m *Mastership, term uint64) error {
	if err := ReconcileGuard(c, m, term); err != nil {
		return err
	}
	if c.GetStatus() != StatusInProgress {
		return guardf("complete re-push for term %d: re-push is %v, not in progress", term, c.GetStatus())
	}
	return nil
}

// ExpireDueGuard guards ExpireCommit of the commit-confirmed rec at time
// now: it was cancelled or its deadline has passed.
func ExpireDueGuard(rec *CommitConfirm, now time.Time) error {
	if deadline := rec.GetDeadline().AsTime(); !rec.GetCancelled() && now.Before(deadline) {
		return guardf("the commit-confirmed of proposal %d is not due until %s", rec.GetProposal(), deadline.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// ExpireAppliedGuard guards the rollback ExpireCommit proposes for a due
// commit-confirmed of proposal p: a change that took effect is rolled back
// only once applied (one that failed needs no rollback).
func ExpireAppliedGuard(p *Proposal) error {
	if p.GetPhase() == PhaseChange && !ChangeFailed(p) && p.GetChange().GetApply() != StatusComplete {
		return guardf("the change of proposal %d is still being applied; it is rolled back once applied", p.GetIndex())
	}
	return nil
}

// Synced reports whether the device holds the applied configuration of the
// current term: applied.term = mastership.term, re-push Complete (spec
// ApplyChange: configuration.applied.term = mastership.term).
func Synced(c *Configuration, m *Mastership) bool {
	return m.GetTerm() != 0 && c.GetApplied().GetTerm() == m.GetTerm() && c.GetStatus() == StatusComplete
}

// syncedGuard requires Synced for action what of proposal i.
func syncedGuard(c *Configuration, m *Mastership, what string, i uint64) error {
	if !Synced(c, m) {
		return guardf("%s %d: configuration not re-pushed for term %d (applied term %d, re-push %v)",
			what, i, m.GetTerm(), c.GetApplied().GetTerm(), c.GetStatus())
	}
	return nil
}

// previousFinished enforces index order: the step of proposal i's
// predecessor prev, if kept, is Finished.
func previousFinished(i uint64, prev *Proposal, step string, status func(*Proposal) Status) error {
	if prev == nil {
		return nil
	}
	if s := status(prev); !Finished(s) {
		return guardf("%s proposal %d: %s of proposal %d is %v", step, i, step, i-1, s)
	}
	return nil
}

func commitStatus(p *Proposal) Status { return p.GetChange().GetCommit() }
func applyStatus(p *Proposal) Status  { return p.GetChange().GetApply() }
