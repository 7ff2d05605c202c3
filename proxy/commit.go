package proxy

import (
	"context"
	"errors"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"github.com/openconfig/gnmi/proto/gnmi_ext"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// DefaultRollbackDuration is how long a commit-confirmed waits for its
// confirmation when the request names no rollback_duration (OpenConfig
// gnmi-commit-confirmed.md, 3.2.1).
const DefaultRollbackDuration = 10 * time.Minute

// commitConfirmed carries out a Set with the commit-confirmed extension
// (gnmi_ext.Commit; OpenConfig gnmi-commit-confirmed.md v0.1.0, docs/design.md §4).
// The record of the outstanding commit lives in the journal, written in
// the same transaction as the proposal, so a sidecar restart keeps its
// deadline; the agent rolls it back when the deadline passes.
// ops are req's operations (checkRequest's).
func (s *Server) commitConfirmed(ctx context.Context, req *gpb.SetRequest, ops []*journal.Op, c *gnmi_ext.Commit, sync bool, by journal.Sender) (*gpb.SetResponse, error) {
	id := c.GetId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "commit-confirmed extension: id is required")
	}
	if _, ok := c.GetAction().(*gnmi_ext.Commit_Commit); !ok {
		if err := s.settle(ctx); err != nil {
			return nil, err
		}
	}
	j := s.opts.Journal
	// Who confirms, cancels or extends is journaled with the action.
	ctx = journal.WithActor(ctx, by)
	switch action := c.GetAction().(type) {
	case *gnmi_ext.Commit_Commit:
		d, err := s.rollbackDuration(action.Commit.GetRollbackDuration(), true)
		if err != nil {
			return nil, err
		}
		if !hasOps(req) {
			return nil, status.Error(codes.InvalidArgument, "commit-confirmed commit carries no operations: it commits the Set's configuration")
		}
		if by.Read = s.beforeImages(ctx, s.readTarget(by.Prefix), ops); len(by.Read.GetUnread()) > 0 {
			return nil, status.Errorf(codes.FailedPrecondition,
				"commit-confirmed: the device's configuration at %s could not be read, so its rollback could only delete what is there; nothing was journaled (retry once the device answers Get, or send the change without commit-confirmed)",
				gnmipath.String(by.Read.Unread[0]))
		}
		s.log.Info("commit-confirmed requested", "id", id, "rollback_duration", d)
		return s.propose(ctx, req, sync, func() (*journal.Proposal, error) {
			return s.opts.Agent.ProposeConfirmedChange(ctx, by, ops, id, time.Now().Add(d))
		})
	case *gnmi_ext.Commit_Confirm:
		if err := noOps(req, "confirm"); err != nil {
			return nil, err
		}
		rec, err := j.ConfirmCommit(ctx, id)
		if err != nil {
			return nil, commitError(err)
		}
		s.log.Info("commit-confirmed confirmed", "id", id, "proposal", rec.GetProposal(), "author", by.Author)
		s.opts.Agent.Notify()
		return s.commitAnswer(ctx, rec)
	case *gnmi_ext.Commit_Cancel:
		if err := noOps(req, "cancel"); err != nil {
			return nil, err
		}
		rec, err := s.opts.Agent.CancelCommit(ctx, id)
		if err != nil {
			return nil, commitError(err)
		}
		s.log.Info("commit-confirmed cancelled", "id", id, "proposal", rec.GetProposal(), "author", by.Author)
		// The agent proposes the rollback once the change is applied; a
		// change that failed instead has nothing to roll back.
		return s.waitRollback(ctx, rec.GetProposal(), sync, true)
	case *gnmi_ext.Commit_SetRollbackDuration:
		if err := noOps(req, "set_rollback_duration"); err != nil {
			return nil, err
		}
		d, err := s.rollbackDuration(action.SetRollbackDuration.GetRollbackDuration(), false)
		if err != nil {
			return nil, err
		}
		rec, err := j.SetCommitDeadline(ctx, id, time.Now().Add(d))
		if err != nil {
			return nil, commitError(err)
		}
		s.log.Info("commit-confirmed deadline moved", "id", id, "proposal", rec.GetProposal(), "deadline", rec.GetDeadline().AsTime(), "author", by.Author)
		s.opts.Agent.Notify()
		return s.commitAnswer(ctx, rec)
	case nil:
		return nil, status.Error(codes.InvalidArgument, "commit-confirmed extension: no action (commit, confirm, cancel or set_rollback_duration)")
	default:
		return nil, status.Errorf(codes.InvalidArgument, "commit-confirmed extension: unknown action %T", action)
	}
}

// rollbackDuration validates a rollback_duration; a missing one is the
// default (at most the maximum) for a commit and an error for
// set_rollback_duration. One above the maximum (Options.MaxRollbackDuration)
// is refused: a write user's commit-confirmed must not block everybody's
// changes for longer (an admin can always cancel it).
func (s *Server) rollbackDuration(d *durationpb.Duration, defaultIfMissing bool) (time.Duration, error) {
	limit := s.maxRollbackDuration()
	if d == nil {
		if defaultIfMissing {
			return min(DefaultRollbackDuration, limit), nil
		}
		return 0, status.Error(codes.InvalidArgument, "commit-confirmed set_rollback_duration: rollback_duration is required")
	}
	if err := d.CheckValid(); err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "commit-confirmed rollback_duration: %v", err)
	}
	if d.AsDuration() <= 0 {
		return 0, status.Errorf(codes.InvalidArgument, "commit-confirmed rollback_duration must be greater than 0, got %v", d.AsDuration())
	}
	if d.AsDuration() > limit {
		return 0, status.Errorf(codes.InvalidArgument,
			"commit-confirmed rollback_duration %v is above the sidecar's limit of %v (serve --max-rollback-duration): ask for at most %v, and extend it (set_rollback_duration) if more time is needed",
			d.AsDuration(), limit, limit)
	}
	return d.AsDuration(), nil
}

// noOps refuses a confirm, cancel or set_rollback_duration that carries
// configuration: only a commit may.
func noOps(req *gpb.SetRequest, action string) error {
	if hasOps(req) {
		return status.Errorf(codes.InvalidArgument, "commit-confirmed %s must carry no operations (only commit carries configuration)", action)
	}
	return nil
}

// commitError maps the journal's refusals of a confirm, cancel or
// set_rollback_duration to the codes gnmi-commit-confirmed.md prescribes.
func commitError(err error) error {
	var mismatch *journal.CommitIDError
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return status.Error(codes.FailedPrecondition, "no commit-confirmed is outstanding")
	case errors.As(err, &mismatch):
		return status.Error(codes.InvalidArgument, mismatch.Reason())
	}
	return JournalError(err)
}

// commitAnswer answers a confirm or set_rollback_duration: the sidecar's
// Response about the commit's proposal.
func (s *Server) commitAnswer(ctx context.Context, rec *journal.CommitConfirm) (*gpb.SetResponse, error) {
	resp := &gpb.SetResponse{Timestamp: time.Now().UnixNano()}
	p, err := s.opts.Journal.Proposal(ctx, rec.GetProposal())
	if err != nil {
		return resp, nil // compacted: nothing more to say about it
	}
	resp.Extension = append(resp.Extension, responseExtension(changeResponse(p)))
	return resp, nil
}
