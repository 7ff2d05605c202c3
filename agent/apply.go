package agent

import (
	"context"
	"errors"
	"log/slog"
	"runtime/trace"
	"time"

	gpb "github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal"
)

// sendChanges sends proposal step.Index, in progress, to the device
// together with the consecutive proposals committed after it that one Set
// can carry (batchChanges), and records the outcome (spec ApplyChange,
// second branch, once per proposal in index order).
func (a *Agent) sendChanges(ctx context.Context, step Step, log *slog.Logger) error {
	s := a.termSession(step.Term)
	if s == nil {
		return nil
	}
	region := trace.StartRegion(ctx, "apply.prepare")
	ps, err := a.readyChanges(ctx, step.Index)
	if err != nil {
		region.End()
		return err
	}
	b, err := batchChanges(ps, a.opts.MaxSetBytes, a.credentials)
	region.End()
	if err != nil {
		log.Error("proposal cannot be sent", "err", err)
		_, _, err = a.j.FailApply(ctx, step.Index, uint32(codes.Internal), err.Error())
		return err
	}
	// A proposal sent before without an answer, or by an earlier run, may
	// have reached the device.
	mayHaveReached := b.first <= a.reached
	reachedBefore := a.reached
	a.reached = max(a.reached, b.last)
	resp, err := a.sendAs(s, step.Term, b.req, b.creds)
	r := a.answered(Event{Kind: EventChangeAnswer, Err: err,
		Batch: Batch{First: b.first, Last: b.last, MayHaveReached: mayHaveReached}})
	if r.Answer == Refused {
		// A Set is atomic: a rejected one left the device as it was.
		a.reached = reachedBefore
	}
	if r.Isolate != 0 {
		if r.Answer == Refused {
			log.Info("device rejected a batch; sending its proposals one at a time",
				"first", b.first, "last", b.last, "code", status.Code(err))
		} else {
			// A batch the device could not finish within ApplyTimeout
			// would time out again.
			log.Info("device timed out on a batch; its proposals go one at a time on the next session",
				"first", b.first, "last", b.last)
		}
		a.isolateThrough = r.Isolate
	}
	switch {
	case r.Session != SessionKeep:
		return a.endSession(ctx, s, err, log)
	case r.Record == RecordNone:
		return nil
	case r.Record == RecordCompleteApply:
		return a.completeBatch(ctx, ps[:b.size()], b, resp, step.Term, log)
	}
	st := status.Convert(err)
	log.Warn("device rejected proposal", "code", st.Code(), "err", st.Message(), "retried", mayHaveReached)
	a.noteRefused(err)
	if r.Restore {
		if done, err := a.restore(ctx, s, step, reachedBefore, log); !done || err != nil {
			return err
		}
	}
	if _, _, err = a.j.FailApplyWithDetails(ctx, step.Index, uint32(st.Code()), st.Message(), st.Proto().GetDetails()); err == nil {
		// Finished: its waiting client is answered now, not at the next
		// resync.
		a.noteApplied(step.Index)
	}
	return err
}

// errEnough stops a journal scan early.
var errEnough = errors.New("enough")

// readyChanges returns proposal i (in progress) and the consecutive
// proposals after it that are committed and wait to be applied: the
// candidates of one batch. After a rejected batch, the proposals up to
// isolateThrough go alone.
func (a *Agent) readyChanges(ctx context.Context, i uint64) ([]*journal.Proposal, error) {
	last := i + maxBatchProposals - 1
	if i <= a.isolateThrough {
		last = i
	}
	var ps []*journal.Proposal
	err := a.j.Proposals(ctx, i, last, func(p *journal.Proposal) error {
		ch := p.GetChange()
		ready := p.GetPhase() == journal.PhaseChange && ch.GetCommit() == journal.StatusComplete &&
			ch.GetApply() == journal.StatusPending && !ch.GetAdopted() && ch.GetAbortedBy() == 0
		if len(ps) > 0 && !ready {
			return errEnough
		}
		ps = append(ps, p)
		if ch.GetAdopted() {
			return errEnough // an adoption is applied alone, without a Set
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	if len(ps) == 0 || ps[0].GetIndex() != i {
		return nil, journal.ErrNotFound
	}
	return ps, nil
}

// completeBatch records that the device accepted batch b (proposals ps),
// sent under term: in one transaction, CompleteApply of its first proposal
// and StartApply then CompleteApply of each of the others, in index order,
// and the StartApply of the next proposal if it is ready (see
// startApplyIn). A refusal (the term moved on) leaves the rest in progress
// or pending, to be sent again after the re-push.
//
// The proposals' clients are answered first (see accept): the device's
// answer is all they wait for, and their proposals are durably committed
// and so will reach the device again should the answer not be recorded.
// The transaction then waits a little for company (UpdateLingering) when
// nothing else waits for the applier, so that a client's next proposal
// shares its fsync: one fsync per Set, not two.
func (a *Agent) completeBatch(ctx context.Context, ps []*journal.Proposal, b *changeBatch, resp *gpb.SetResponse, term uint64, log *slog.Logger) error {
	defer trace.StartRegion(ctx, "apply.complete").End()
	for k, r := range b.split(resp) {
		if r != nil {
			a.keepResponse(b.first+uint64(k), r)
		}
	}
	defer a.unaccept(ps)
	var done uint64
	// Recorded even if the agent is stopping: its clients may have been
	// answered already, and a graceful stop leaves the journal at rest.
	err := a.j.UpdateLingering(context.WithoutCancel(ctx), a.lingerAfter(ctx, b.last), func(tx *journal.Tx) error {
		done = 0
		for i := b.first; i <= b.last; i++ {
			if i != b.first {
				if _, _, err := tx.StartApply(i); err != nil {
					return a.stopAt(err, i, log)
				}
			}
			if _, _, err := tx.CompleteApply(i, term); err != nil {
				if i == b.first {
					return err
				}
				return a.stopAt(err, i, log)
			}
			done = i
		}
		return a.startApplyIn(tx)
	}, func() { a.accept(ps) })
	if err != nil {
		return err
	}
	a.noteApplied(done)
	log.Debug("applied", "through", done, "batch", b.size())
	return nil
}

// lingerAfter is how long the completion of a batch ending at proposal
// last may wait for company: Options.CompletionLinger if nothing journaled waits
// for the applier (no later proposal, no rollback), else 0.
func (a *Agent) lingerAfter(ctx context.Context, last uint64) time.Duration {
	c, err := a.j.Configuration(ctx)
	if err != nil || c.GetLastIndex() > last || c.GetRollingBack() != 0 {
		return 0
	}
	return a.opts.CompletionLinger
}

// accept makes proposals ps, which the device accepted, answered as
// applied (WaitChange) before that is recorded in the journal. ps are the
// applier's own copies (readyChanges), read by nobody else: they are
// marked applied in place and handed to the waiters as they are.
func (a *Agent) accept(ps []*journal.Proposal) {
	now := timestamppb.Now()
	a.mu.Lock()
	for _, p := range ps {
		p.Change.Apply = journal.StatusComplete
		p.Change.Applied = now
		a.accepted[p.GetIndex()] = p
	}
	a.mu.Unlock()
	a.broadcast()
}

// unaccept forgets proposals ps once their completion is recorded (or
// could not be: then they are sent again).
func (a *Agent) unaccept(ps []*journal.Proposal) {
	a.mu.Lock()
	for _, p := range ps {
		delete(a.accepted, p.GetIndex())
	}
	a.mu.Unlock()
	a.broadcast()
}

// acceptedChange returns proposal i as applied if the device accepted it
// and the journal does not record that yet, else nil.
func (a *Agent) acceptedChange(i uint64) *journal.Proposal {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.accepted[i]
}

// Settle waits until the journal records the device's answer to every
// proposal already answered to its client (see completeBatch): a read of
// the journal after Settle sees every Set acknowledged before it as
// applied. It returns at once when nothing is outstanding.
func (a *Agent) Settle(ctx context.Context) error {
	a.mu.Lock()
	var through uint64
	for i := range a.accepted {
		through = max(through, i)
	}
	a.mu.Unlock()
	for {
		changed := a.Changes()
		a.mu.Lock()
		outstanding := false
		for i := range a.accepted {
			if i <= through {
				outstanding = true
				break
			}
		}
		a.mu.Unlock()
		if !outstanding {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stopAt ends a batch's completion at proposal i, whose transition the
// journal refused: what is recorded so far stays (the refusal wrote
// nothing). Any other error drops the transaction.
func (a *Agent) stopAt(err error, i uint64, log *slog.Logger) error {
	if !errors.Is(err, journal.ErrGuard) {
		return err
	}
	log.Info("batch completion stopped", "proposal", i, "err", err)
	return nil
}

// restore undoes on the device whatever earlier Sets carrying proposals
// step.Index..through (at most the committed ones) may have written,
// before the rejection of step.Index is recorded: every path they wrote
// gets its applied value back, as FailApply gives it back in the committed
// values. done is false if the session ended first (the proposal stays in
// progress and is tried again on the next term, re-push included).
func (a *Agent) restore(ctx context.Context, s *session, step Step, through uint64, log *slog.Logger) (done bool, err error) {
	var written []*journal.PathValue
	err = a.j.Proposals(ctx, step.Index, through, func(p *journal.Proposal) error {
		if p.GetPhase() == journal.PhaseChange && p.GetChange().GetCommit() == journal.StatusComplete {
			written = append(written, p.GetChange().GetValues()...)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	tops := topTombstones(inPathOrder(written))
	var applied []*journal.PathValue
	for _, top := range tops {
		err := a.j.Applied(ctx, top.GetPath(), func(v *journal.PathValue) error {
			applied = append(applied, v)
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	values := append(tops, inWriteOrder(applied)...)
	out, err := a.pushValues(s, step.Term, values, a.credentials(step.Index))
	if err != nil {
		return false, a.endSession(ctx, s, err, log)
	}
	if PushOutcome(Event{Push: PushRestore, Refused: out.refused}).Record == RecordMarkOutOfSync {
		// The device refuses to put some paths back: they are out of sync
		// (the journal's applied values there may not be on the device).
		if _, err := a.j.MarkOutOfSync(ctx, out.refused, journal.CauseRestore, step.Index, out.code(), out.message()); err != nil {
			return false, err
		}
		a.reportRefused(log, "device refused to restore a path a rejected proposal may have written; it is out of sync until resolved", out)
	}
	log.Info("restored the paths of a rejected proposal an earlier attempt may have written", "values", len(values), "refused", len(out.refused))
	return true, nil
}
