package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The commit-confirmed transitions (docs/design.md §4 commit-confirmed; OpenConfig
// gnmi-commit-confirmed.md v0.1.0, the gnmi_ext.Commit extension). At most
// one commit-confirmed is outstanding: its CommitConfirm record (key "x")
// names the client's commit id, the proposal it journaled, the deadline and
// whether it was cancelled. While it is outstanding no other change or
// rollback may be proposed, so its proposal is always the newest and the
// rollback that undoes it is always allowed once the change is applied.
// The record leaves the journal when the commit is confirmed
// (ConfirmCommit), when its rollback is proposed (ExpireCommit, after the
// deadline or a cancel) or when its change fails (FailCommit, FailApply,
// AbortApply), each time in the same transaction as the rest of the
// transition.
//
// Errors, for a commit id that does not name the outstanding record: none
// outstanding wraps ErrNotFound, another id wraps ErrInvalid. The messages
// never repeat the outstanding record's id: whoever knows it may confirm or
// cancel the commit.

// ProposeConfirmedChange journals a Set carrying a gnmi_ext.Commit "commit"
// action (docs/design.md §4 commit-confirmed; OpenConfig gnmi-commit-confirmed.md
// v0.1.0): it is ProposeChange plus, in the same transaction, the
// CommitConfirm record {id, proposal: the new index, deadline, started:
// now}. The Observer sees ActionProposeChange, exactly as ProposeChange
// emits it, then ActionSetCommitConfirm. It is refused (ErrGuard) while
// another commit-confirmed is outstanding; an empty id or a zero deadline
// wraps ErrInvalid. The deadline is not checked against the clock: one
// already past only makes the rollback due as soon as the change is
// applied. The then functions run as ProposeChange's do.
func (j *Journal) ProposeConfirmedChange(ctx context.Context, by Sender, ops []*Op, id string, deadline time.Time, then ...func(*Tx) error) (*Proposal, error) {
	if id == "" {
		return nil, fmt.Errorf("journal: commit-confirmed: the commit id is empty: %w", ErrInvalid)
	}
	if deadline.IsZero() {
		return nil, fmt.Errorf("journal: commit-confirmed: no rollback deadline: %w", ErrInvalid)
	}
	return j.propose(ctx, by, ops, "a commit-confirmed is already outstanding", "confirm or cancel it before starting another",
		func(w *writeTxn, p *Proposal) error {
			return w.putCommitConfirm(&CommitConfirm{
				Id:       id,
				Proposal: p.GetIndex(),
				Deadline: timestamppb.New(deadline),
				Started:  w.stamp(),
				Author:   by.Author,
			})
		}, then)
}

// ConfirmCommit confirms the outstanding commit-confirmed with the given id
// (gnmi_ext.Commit "confirm"; docs/design.md §4; OpenConfig gnmi-commit-confirmed.md
// v0.1.0): the record is removed and the change stays. It returns the
// removed record; the Observer sees ActionClearCommitConfirm. None
// outstanding wraps ErrNotFound, another id ErrInvalid; a cancelled commit
// can no longer be confirmed (ErrGuard): its rollback is under way. Who
// confirmed (WithActor) and when is recorded on the proposal
// (Change.commit_actions).
func (j *Journal) ConfirmCommit(ctx context.Context, id string) (*CommitConfirm, error) {
	by := actor(ctx)
	return j.onOutstandingCommit(ctx, id, func(w *writeTxn, rec *CommitConfirm) error {
		if rec.GetCancelled() {
			return cancelledGuard(rec)
		}
		if err := w.recordCommitAction(rec, CommitActionConfirm, by, nil); err != nil {
			return err
		}
		if err := w.delete(keyCommitConfirm); err != nil {
			return err
		}
		w.emit(Event{Action: ActionClearCommitConfirm, Index: rec.GetProposal(), CommitConfirm: rec})
		return nil
	})
}

// CancelCommit cancels the outstanding commit-confirmed with the given id
// (gnmi_ext.Commit "cancel"; docs/design.md §4; OpenConfig gnmi-commit-confirmed.md
// v0.1.0): the record is marked cancelled and its deadline set to now, so
// the agent rolls the change back (ExpireCommit) as soon as it is applied.
// It returns the record as it left it; the Observer sees
// ActionSetCommitConfirm. Cancelling again under the same id returns the
// record and writes nothing. None outstanding wraps ErrNotFound, another id
// ErrInvalid. Who cancelled (WithActor) and when is recorded on the record
// (cancelled_by) and the proposal (Change.commit_actions), and the
// rollback the cancel starts names them as its author (ExpireCommit).
func (j *Journal) CancelCommit(ctx context.Context, id string) (*CommitConfirm, error) {
	by := actor(ctx)
	return j.onOutstandingCommit(ctx, id, func(w *writeTxn, rec *CommitConfirm) error {
		if rec.GetCancelled() {
			return nil
		}
		rec.Cancelled = true
		rec.Deadline = w.stamp()
		rec.CancelledBy = by.Author
		if err := w.recordCommitAction(rec, CommitActionCancel, by, rec.Deadline); err != nil {
			return err
		}
		return w.putCommitConfirm(rec)
	})
}

// SetCommitDeadline replaces the deadline of the outstanding
// commit-confirmed with the given id (gnmi_ext.Commit
// "set_rollback_duration"; docs/design.md §4; OpenConfig gnmi-commit-confirmed.md
// v0.1.0). It returns the record as it left it; the Observer sees
// ActionSetCommitConfirm. None outstanding wraps ErrNotFound, another id or
// a zero deadline ErrInvalid; a cancelled commit keeps its deadline
// (ErrGuard): its rollback is under way. Who moved it (WithActor) and when
// is recorded on the record (extended_by, extended) and the proposal
// (Change.commit_actions).
func (j *Journal) SetCommitDeadline(ctx context.Context, id string, deadline time.Time) (*CommitConfirm, error) {
	if deadline.IsZero() {
		return nil, fmt.Errorf("journal: commit-confirmed: no rollback deadline: %w", ErrInvalid)
	}
	by := actor(ctx)
	return j.onOutstandingCommit(ctx, id, func(w *writeTxn, rec *CommitConfirm) error {
		if rec.GetCancelled() {
			return cancelledGuard(rec)
		}
		rec.Deadline = timestamppb.New(deadline)
		rec.ExtendedBy = by.Author
		rec.Extended = w.stamp()
		if err := w.recordCommitAction(rec, CommitActionExtend, by, rec.Deadline); err != nil {
			return err
		}
		return w.putCommitConfirm(rec)
	})
}

// onOutstandingCommit runs fn, in one transition, on the outstanding
// commit-confirmed if its id is id, and returns the record as fn left it.
func (j *Journal) onOutstandingCommit(ctx context.Context, id string, fn func(w *writeTxn, rec *CommitConfirm) error) (*CommitConfirm, error) {
	var out *CommitConfirm
	err := j.submit(ctx, func(w *writeTxn) error {
		out = nil
		rec, err := w.outstandingCommit(id)
		if err != nil {
			return err
		}
		if err := fn(w, rec); err != nil {
			return err
		}
		out = rec
		return nil
	})
	return out, err
}

// putCommitConfirm stores the outstanding commit-confirmed rec.
func (w *writeTxn) putCommitConfirm(rec *CommitConfirm) error {
	if err := w.put(keyCommitConfirm, rec); err != nil {
		return err
	}
	w.emit(Event{Action: ActionSetCommitConfirm, Index: rec.GetProposal(), CommitConfirm: rec})
	return nil
}

// ExpireCommit ends the outstanding commit-confirmed with the given id
// whose deadline passed or that was cancelled (docs/design.md §4: the rollback of
// an unconfirmed commit; OpenConfig gnmi-commit-confirmed.md v0.1.0). The
// agent calls it. In one transaction, according to the record's proposal:
//
//   - its change failed or was aborted (commit or apply), it is already
//     being rolled back, or retention dropped it: the record is removed,
//     there is nothing to roll back. It returns the proposal (nil if
//     dropped) and a nil configuration.
//   - its change is applied: the record is removed and the rollback of the
//     proposal starts exactly as ProposeRollback starts it (same guards,
//     same effect, and the same ActionProposeRollback event, followed by
//     ActionClearCommitConfirm). It returns the proposal and configuration
//     as the rollback left them. If ProposeRollback's guards refuse, that
//     refusal is returned and nothing is written (while a commit-confirmed
//     is outstanding no other change or rollback can be proposed, so this
//     does not happen in practice).
//   - its change is still being committed or applied: refused (ErrGuard)
//     and the record kept; call again once it is applied.
//
// It is refused (ErrGuard) unless the record is cancelled or its deadline
// has passed by the journal's clock: a set_rollback_duration that moved
// the deadline after the caller decided must win.
//
// None outstanding wraps ErrNotFound, another id ErrInvalid.
func (j *Journal) ExpireCommit(ctx context.Context, id string) (*Proposal, *Configuration, error) {
	var outP *Proposal
	var outC *Configuration
	err := j.submit(ctx, func(w *writeTxn) error {
		outP, outC = nil, nil
		rec, err := w.outstandingCommit(id)
		if err != nil {
			return err
		}
		if err := ExpireDueGuard(rec, w.now); err != nil {
			return err
		}
		c, err := w.configuration()
		if err != nil {
			return err
		}
		i := rec.GetProposal()
		p, err := w.proposal(c, i)
		switch {
		case errors.Is(err, ErrCompacted):
			return w.clearCommitConfirm(rec)
		case err != nil:
			return err
		}
		if err := ExpireAppliedGuard(p); err != nil {
			return err
		}
		if p.GetPhase() == PhaseRollback || ChangeFailed(p) {
			if err := w.clearCommitConfirm(rec); err != nil {
				return err
			}
			outP = p
			return nil
		}
		if err := w.proposeRollback(c, p); err != nil {
			return err
		}
		if cancel := LastCommitAction(p, CommitActionCancel); rec.GetCancelled() && cancel != nil {
			// The rollback of a cancel is its author's.
			p.Rollback.Author, p.Rollback.Comment = cancel.GetAuthor(), cancel.GetComment()
		}
		if err := w.putProposalAndConfiguration(p, c); err != nil {
			return err
		}
		w.emit(Event{Action: ActionProposeRollback, Index: i, Proposal: p, Configuration: c})
		if err := w.clearCommitConfirm(rec); err != nil {
			return err
		}
		outP, outC = p, c
		return nil
	})
	return outP, outC, err
}

// clearCommitConfirm removes the record rec (the one stored) and emits
// ActionClearCommitConfirm.
func (w *writeTxn) clearCommitConfirm(rec *CommitConfirm) error {
	if err := w.delete(keyCommitConfirm); err != nil {
		return err
	}
	w.emit(Event{Action: ActionClearCommitConfirm, Index: rec.GetProposal(), CommitConfirm: rec})
	return nil
}

// clearFailedCommitConfirm is called by a proposal transition that made the
// change of the proposals failed Failed or Aborted: if the outstanding
// commit-confirmed is one of theirs, it is removed (nothing is left to
// confirm or roll back) and its ActionClearCommitConfirm event is queued to
// follow the transition's own.
func (w *writeTxn) clearFailedCommitConfirm(failed ...uint64) error {
	rec, found, err := w.commitConfirm()
	if err != nil || !found || !slices.Contains(failed, rec.GetProposal()) {
		return err
	}
	if err := w.delete(keyCommitConfirm); err != nil {
		return err
	}
	w.followUps = append(w.followUps, Event{Action: ActionClearCommitConfirm, Index: rec.GetProposal(), CommitConfirm: rec})
	return nil
}

// outstandingCommit returns the outstanding commit-confirmed if its id is
// id: none outstanding wraps ErrNotFound, another id ErrInvalid.
func (w *writeTxn) outstandingCommit(id string) (*CommitConfirm, error) {
	rec, found, err := w.commitConfirm()
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errNoCommitConfirm()
	}
	if rec.GetId() != id {
		return nil, &CommitIDError{ID: id, Proposal: rec.GetProposal()}
	}
	return rec, nil
}

// CommitIDError is a commit-confirmed action naming another id than the
// outstanding commit's (which it does not reveal). It wraps ErrInvalid.
type CommitIDError struct {
	// ID is the id the caller gave; Proposal the outstanding commit's.
	ID       string
	Proposal uint64
}

// Reason is the refusal in words meant for the client.
func (e *CommitIDError) Reason() string {
	return fmt.Sprintf("commit id %q does not match the outstanding commit-confirmed (proposal %d)", e.ID, e.Proposal)
}

func (e *CommitIDError) Error() string { return "journal: " + e.Reason() + ": " + ErrInvalid.Error() }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *CommitIDError) Unwrap() error { return ErrInvalid }

func errNoCommitConfirm() error {
	return fmt.Errorf("journal: no commit-confirmed is outstanding: %w", ErrNotFound)
}

func cancelledGuard(rec *CommitConfirm) error {
	return guardf("commit-confirmed of proposal %d was cancelled; its rollback is under way", rec.GetProposal())
}

// commitConfirmGuard refuses a transition while a commit-confirmed is
// outstanding: "<lead> (proposal N, rolled back at <deadline> unless
// confirmed): <advice>", or for a cancelled one "<lead> (proposal N,
// cancelled): wait for its rollback".
func commitConfirmGuard(txn *badger.Txn, lead, advice string) error {
	rec, _, err := loadCommitConfirm(txn)
	if err != nil {
		return err
	}
	return commitConfirmRefusal(rec, lead, advice)
}

// commitConfirmGuard is commitConfirmGuard in w.
func (w *writeTxn) commitConfirmGuard(lead, advice string) error {
	rec, _, err := w.commitConfirm()
	if err != nil {
		return err
	}
	return commitConfirmRefusal(rec, lead, advice)
}

// commitConfirmRefusal is commitConfirmGuard's refusal while rec (nil:
// none) is outstanding.
func commitConfirmRefusal(rec *CommitConfirm, lead, advice string) error {
	if rec == nil {
		return nil
	}
	if rec.GetCancelled() {
		return guardf("%s (proposal %d, cancelled): wait for its rollback", lead, rec.GetProposal())
	}
	return guardf("%s (proposal %d, rolled back at %s unless confirmed): %s",
		lead, rec.GetProposal(), rec.GetDeadline().AsTime().UTC().Format(time.RFC3339), advice)
}

// commitConfirm is loadCommitConfirm in w.
func (w *writeTxn) commitConfirm() (*CommitConfirm, bool, error) {
	if w.hasHeads {
		if w.heads.confirm == nil {
			return nil, false, nil
		}
		return proto.CloneOf(w.heads.confirm), true, nil
	}
	return loadCommitConfirm(w.txn)
}

// loadCommitConfirm reads the outstanding commit-confirmed, if any.
func loadCommitConfirm(txn *badger.Txn) (*CommitConfirm, bool, error) {
	rec := &CommitConfirm{}
	found, err := getRecord(txn, keyCommitConfirm, rec)
	if err != nil {
		return nil, false, err
	}
	if !found {
		return nil, false, nil
	}
	return rec, true, nil
}
