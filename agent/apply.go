package agent

import (
	"context"
	"errors"
	"fmt"
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
// second branch, once per proposal in index order). The Set goes with its
// waiting clients' deadline and is cancelled if one gives up
// (changeContext); a proposal whose client gave up before it was sent is
// withdrawn (withdraw). An answer in doubt is settled by reading the
// device back (readBack), never by sending the Set again.
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
	mayHaveReached := step.Index <= a.reached
	if st, ok := a.refusedAt[step.Index]; ok {
		// The device refused a batch naming this proposal's paths: its
		// answer is this proposal's, not sent again.
		delete(a.refusedAt, step.Index)
		region.End()
		log.Warn("device rejected proposal", "code", st.Code(), "err", st.Message(), "in_batch", true)
		return a.failChange(ctx, s, step, st, mayHaveReached, a.reached, log)
	}
	if why := a.client(step.Index).gaveUp(time.Now()); why != nil {
		region.End()
		return a.withdraw(ctx, s, step, why, mayHaveReached, log)
	}
	b, err := batchChanges(a.whileWaited(ps), a.opts.MaxSetBytes, a.credentials)
	region.End()
	if err != nil {
		log.Error("proposal cannot be sent", "err", err)
		return a.failChange(ctx, s, step, status.New(codes.Internal, err.Error()), false, a.reached, log)
	}
	// A proposal sent before without an answer, or by an earlier run, may
	// have reached the device.
	reachedBefore := a.reached
	a.reached = max(a.reached, b.last)
	ev := Event{Kind: EventChangeAnswer, Batch: Batch{First: b.first, Last: b.last, MayHaveReached: mayHaveReached},
		Waiting: b.size() == 1 && a.client(b.first) != nil}
	var resp *gpb.SetResponse
	var r Ready
	for {
		resp, ev.Err = a.sendChange(s, step.Term, b)
		ev.Attempt, ev.Elapsed = a.attempted(b.first)
		ev.ReadBack = NotRead
		r = a.answered(ev)
		if r.ReadBack {
			ev.ReadBack = a.readBack(ctx, s, ps[:b.size()], b, log)
			r = a.answered(ev)
		}
		if !r.Retry {
			break
		}
		if !a.retryAfter(ctx, s, ev, log) {
			return ctx.Err() // the session ended: the next one sends it again
		}
	}
	a.retried(b.first)
	if r.Answer == Refused {
		// A Set is atomic: a rejected one left the device as it was.
		a.reached = reachedBefore
	}
	if r.Isolate != 0 {
		blamed := uint64(0)
		if ev.ReadBack == NotRead {
			blamed = blame(ps[:b.size()], ev.Err)
		}
		if blamed != 0 {
			a.refusedAt[blamed] = status.Convert(ev.Err)
		}
		log.Info("the device did not apply a batch; sending its proposals one at a time",
			"first", b.first, "last", b.last, "code", status.Code(ev.Err), "read_back", ev.ReadBack != NotRead, "refusal_names", blamed)
		a.isolateThrough = r.Isolate
	}
	switch {
	case r.Session != SessionKeep:
		return a.endSession(ctx, s, ev.Err, log)
	case r.Record == RecordNone:
		return nil
	case r.Record == RecordCompleteApply:
		return a.completeBatch(ctx, ps[:b.size()], b, resp, step.Term, log)
	case r.Record == RecordGiveUp:
		return a.giveUp(ctx, step, ev, log)
	}
	st := status.Convert(ev.Err)
	if ev.ReadBack == ReadNotApplied {
		st = notApplied(st, a.client(step.Index).gaveUp(time.Now()))
	}
	log.Warn("device rejected proposal", "code", st.Code(), "err", st.Message(), "retried", mayHaveReached)
	a.noteRefused(st.Err())
	return a.failChange(ctx, s, step, st, r.Restore, reachedBefore, log)
}

// failChange records proposal step.Index failed with st (FailApply),
// after putting back on the device the paths earlier Sets carrying it
// (through reachedBefore) may have written, if restore.
func (a *Agent) failChange(ctx context.Context, s *session, step Step, st *status.Status, restore bool, reachedBefore uint64, log *slog.Logger) error {
	if restore {
		if done, err := a.restore(ctx, s, step, reachedBefore, log); !done || err != nil {
			return err
		}
	}
	_, _, err := a.j.FailApplyWithDetails(ctx, step.Index, uint32(st.Code()), st.Message(), st.Proto().GetDetails())
	if err == nil {
		// Finished: its waiting client is answered now, not at the next
		// resync. The later committed proposals it re-based are
		// committed again now (journal.FailApply).
		a.noteApplied(step.Index)
		poke(a.commitWake)
	}
	return err
}

// withdraw records proposal step.Index failed without sending it: its
// waiting client gave up (why) before its turn came.
func (a *Agent) withdraw(ctx context.Context, s *session, step Step, why error, mayHaveReached bool, log *slog.Logger) error {
	st := status.FromContextError(why)
	st = status.New(st.Code(), fmt.Sprintf("the client gave up (%s) before its Set was sent to the device: the sidecar withdrew it, and nothing was sent", st.Message()))
	log.Info("proposal withdrawn: its client gave up before it was sent", "code", st.Code())
	return a.failChange(ctx, s, step, st, mayHaveReached, a.reached, log)
}

// notApplied is the outcome of a Set in doubt that the device, read
// back, did not apply: the Set's own error, told as such; why is the
// waiting client's giving up, if it did.
func notApplied(st *status.Status, why error) *status.Status {
	msg := st.Message()
	switch {
	case why != nil:
		msg = fmt.Sprintf("the client gave up (%s) while the device worked on its Set: the sidecar cancelled it, and the device, read back, did not apply it", status.FromContextError(why).Message())
		return status.New(status.FromContextError(why).Code(), msg)
	case st.Code() == codes.DeadlineExceeded || st.Code() == codes.Canceled:
		msg = fmt.Sprintf("the device did not answer in time (%s); read back, it did not apply the Set", msg)
	default:
		msg = fmt.Sprintf("%s (the device, read back, did not apply the Set)", msg)
	}
	return status.New(st.Code(), msg)
}

// whileWaited returns the prefix of ps before the first proposal, after
// the first, whose waiting client gave up: that one is withdrawn on its
// turn, and its client's giving up must not cancel the others' Set.
func (a *Agent) whileWaited(ps []*journal.Proposal) []*journal.Proposal {
	now := time.Now()
	for n, p := range ps[1:] {
		if a.client(p.GetIndex()).gaveUp(now) != nil {
			return ps[:n+1]
		}
	}
	return ps
}

// sendChange sends batch b's Set under term, with its clients' deadline
// and cancel (changeContext).
func (a *Agent) sendChange(s *session, term uint64, b *changeBatch) (*gpb.SetResponse, error) {
	ctx, cancel := a.changeContext(s, b.first, b.last)
	defer cancel()
	return a.sendWith(ctx, s, b.req, b.creds)
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
		if c, ok := a.waiting.apply[p.GetIndex()]; ok {
			close(c)
			delete(a.waiting.apply, p.GetIndex())
		}
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
