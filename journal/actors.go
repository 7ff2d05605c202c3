package journal

import (
	"context"
	"errors"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
)

// Who acted: every state-changing action records its author and time.
// Changes, rollbacks, tags and resolutions take their Sender as an
// argument; the actions on an outstanding commit-confirmed (ConfirmCommit,
// CancelCommit, SetCommitDeadline) and DeleteTag, which may be called
// through the agent, take it from their context (WithActor).

type (
	// CommitAction is a confirm, cancel or extend of a commit-confirmed
	// change, recorded on its proposal (Change.commit_actions).
	CommitAction = journalpb.CommitAction
	// TagDeletion is a deleted tag and who deleted it (TagDeletions).
	TagDeletion = journalpb.TagDeletion
)

// Commit-confirmed actions, as CommitAction.action names them.
const (
	CommitActionConfirm = "confirm"
	CommitActionCancel  = "cancel"
	CommitActionExtend  = "extend"
)

type actorKey struct{}

// WithActor returns ctx naming by as who asks for the journal actions
// made with it: ConfirmCommit, CancelCommit, SetCommitDeadline and
// DeleteTag record by's author and comment.
func WithActor(ctx context.Context, by Sender) context.Context {
	return context.WithValue(ctx, actorKey{}, by)
}

// actor is the Sender WithActor put in ctx (zero: none).
func actor(ctx context.Context) Sender {
	by, _ := ctx.Value(actorKey{}).(Sender)
	return by
}

// recordCommitAction appends action, by by, to the commit-confirmed rec's
// proposal (nothing if retention dropped it). deadline is the deadline the
// action leaves (nil: none).
func (w *writeTxn) recordCommitAction(rec *CommitConfirm, action string, by Sender, deadline *timestamppb.Timestamp) error {
	c, err := w.configuration()
	if err != nil {
		return err
	}
	p, err := w.proposal(c, rec.GetProposal())
	switch {
	case errors.Is(err, ErrCompacted), errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	if p.Change == nil {
		p.Change = &Change{}
	}
	p.Change.CommitActions = append(slices.Clip(p.Change.CommitActions), &CommitAction{
		Action:   action,
		Author:   by.Author,
		Comment:  by.Comment,
		Time:     w.stamp(),
		Deadline: deadline,
	})
	return w.put(proposalKey(p.GetIndex()), p)
}

// LastCommitAction is the newest of proposal p's commit-confirmed actions
// named action (nil if none).
func LastCommitAction(p *Proposal, action string) *CommitAction {
	acts := p.GetChange().GetCommitActions()
	for i := len(acts) - 1; i >= 0; i-- {
		if acts[i].GetAction() == action {
			return acts[i]
		}
	}
	return nil
}

// nsTagDeletion holds the deleted tags, by Configuration.tag_changes at
// their deletion.
var nsTagDeletion = []byte("td/")

// keepTagDeletions is how many tag creations and deletions back a deleted
// tag's record is kept.
const keepTagDeletions = 256

// putTagDeletion records the deletion of t, the seq-th tag change, and
// drops the record keepTagDeletions changes older.
func (w *writeTxn) putTagDeletion(seq uint64, t *Tag, by Sender) error {
	if err := w.put(uint64Key(nsTagDeletion, seq), &TagDeletion{
		Tag: t, Deleted: w.stamp(), Author: by.Author, Comment: by.Comment, Seq: seq,
	}); err != nil {
		return err
	}
	return w.pruneTagDeletions(seq)
}

// pruneTagDeletions drops the deleted tag recorded keepTagDeletions tag
// changes before the seq-th.
func (w *writeTxn) pruneTagDeletions(seq uint64) error {
	if seq <= keepTagDeletions {
		return nil
	}
	old := uint64Key(nsTagDeletion, seq-keepTagDeletions)
	if found, err := w.get(old, &TagDeletion{}); err != nil || !found {
		return err
	}
	return w.delete(old)
}

// TagDeletions returns the deleted tags still recorded, oldest first.
func (j *Journal) TagDeletions(ctx context.Context) ([]*TagDeletion, error) {
	var out []*TagDeletion
	err := j.view(ctx, func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsTagDeletion, func(_, val []byte) error {
			d := &TagDeletion{}
			if err := decodeRecord(val, d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}
