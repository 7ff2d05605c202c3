package journal

import (
	"bytes"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A device Set carries a batch of proposals, first..last, applied in index
// order, and its answer completes them all in one writer request, at one
// time. Their records would each be written again for that (their apply
// step only: started and applied at that time, complete), a value-log
// record per client Set when many clients write at once. Since format 8
// the writer writes the completion into last's record only, and records
// last in the configuration (applies_completed_through); the records of
// the others stay as they were. Applies are sequential (spec ApplyChange:
// one apply in progress, in index order), so a change at or below that
// index whose record still reads committed, apply pending or in progress,
// did complete: with the apply time of the first record above it whose
// change's apply reads complete, which is written by the same request
// (the writer skips a record only when every proposal between it and
// last completed in that request). Every reader of a proposal's record
// reads it through derivedComplete.

// derivedComplete reports whether p, as its record reads under
// configuration c, is a change whose apply completed without its record
// being written again.
func derivedComplete(c *Configuration, p *Proposal) bool {
	return p.GetIndex() <= c.GetAppliesCompletedThrough() && awaitsApply(p)
}

// awaitsApply reports whether p's record says a change committed and not
// yet applied (its apply pending or in progress).
func awaitsApply(p *Proposal) bool {
	ch := p.GetChange()
	return p.GetPhase() == PhaseChange && ch.GetCommit() == StatusComplete &&
		(ch.GetApply() == StatusPending || ch.GetApply() == StatusInProgress)
}

// completeAt marks p's change applied at (nil for a status view, which
// has no times): complete, and started then too if its record has no
// start.
func completeAt(p *Proposal, at *timestamppb.Timestamp) {
	p.Change.Apply = StatusComplete
	if at == nil {
		return
	}
	if p.Change.ApplyStarted == nil {
		p.Change.ApplyStarted = at
	}
	p.Change.Applied = at
}

// completeIfDerived completes p, a whole proposal as its record reads
// under c, if it is derivedComplete, with its apply time read from txn.
func completeIfDerived(txn *badger.Txn, c *Configuration, p *Proposal) error {
	if !derivedComplete(c, p) {
		return nil
	}
	at, err := derivedApplyTime(txn, c, p.GetIndex())
	if err != nil {
		return err
	}
	completeAt(p, at)
	return nil
}

// derivedApplyTime reads the apply time of proposal i, a derivedComplete
// change: that of the first record above it whose change's apply reads
// complete.
func derivedApplyTime(txn *badger.Txn, c *Configuration, i uint64) (*timestamppb.Timestamp, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = nsProposal
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	end := proposalKey(c.GetAppliesCompletedThrough())
	for it.Seek(proposalKey(i + 1)); it.ValidForPrefix(nsProposal) && bytes.Compare(it.Item().Key(), end) <= 0; it.Next() {
		var at *timestamppb.Timestamp
		err := readValue(it.Item(), func(v []byte) error {
			st, err := decodeProposalStatus(v)
			if err != nil || st.GetChange().GetApply() != StatusComplete {
				return err
			}
			p := &Proposal{} // the one record it takes the time from, whole
			if err := decodeRecord(v, p); err != nil {
				return err
			}
			at = p.GetChange().GetApplied()
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("journal: decode %q: %w", it.Item().Key(), err)
		}
		if at != nil {
			return at, nil
		}
	}
	return nil, fmt.Errorf("journal: proposal %d: its apply completed with a later proposal's (the journal's applies_completed_through is %d), but no later record holds that completion: %w",
		i, c.GetAppliesCompletedThrough(), ErrCorrupt)
}

// derivedScan completes, for a scan of proposal records in index order,
// the derivedComplete proposals with the apply time of the first
// completed record after them: it holds them back until that record comes
// (next) or the scan ends without it (rest).
type derivedScan struct {
	c    *Configuration
	held []*Proposal
}

// next takes the scan's next proposal and gives fn those ready, in index
// order (held ones first).
func (d *derivedScan) next(p *Proposal, fn func(*Proposal) error) error {
	if derivedComplete(d.c, p) {
		d.held = append(d.held, p)
		return nil
	}
	if len(d.held) > 0 {
		// p completes them, having completed with them. (A record that
		// does not would be a damaged journal's: they come complete,
		// without a time.)
		var at *timestamppb.Timestamp
		if p.GetChange().GetApply() == StatusComplete {
			at = p.GetChange().GetApplied()
		}
		if err := d.giveHeld(at, fn); err != nil {
			return err
		}
	}
	return fn(p)
}

// rest gives fn the proposals still held when the scan stopped before
// the record that completes them, with their time read from txn if
// withTimes (status views need none).
func (d *derivedScan) rest(txn *badger.Txn, withTimes bool, fn func(*Proposal) error) error {
	if len(d.held) == 0 {
		return nil
	}
	var at *timestamppb.Timestamp
	if withTimes {
		var err error
		if at, err = derivedApplyTime(txn, d.c, d.held[len(d.held)-1].GetIndex()); err != nil {
			return err
		}
	}
	return d.giveHeld(at, fn)
}

// giveHeld gives fn the held proposals, applied at.
func (d *derivedScan) giveHeld(at *timestamppb.Timestamp, fn func(*Proposal) error) error {
	held := d.held
	d.held = nil
	for _, h := range held {
		completeAt(h, at)
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

// completedWithoutRecords picks, among the proposals of the request w is
// ending (w.pending), the ones whose completion needs no record of its
// own, and records in the configuration the newest proposal they complete
// with (applies_completed_through). A proposal qualifies if its pending
// record is the one the writer last wrote of it but for its apply step,
// completed now, and every proposal above it up to the newest such one,
// which is written, completed now in this request too. It needs the
// configuration pending in w (this transaction writes it, at its end), so
// that the index goes with the records. indices are w.pending's, sorted.
func (w *writeTxn) completedWithoutRecords(indices []uint64) map[uint64]recentProposal {
	if !w.configPending || w.recent == nil || len(indices) < 2 {
		return nil
	}
	now := w.stamp()
	k := len(indices) - 1
	for k >= 0 && !completedAt(w.pending[indices[k]], now) {
		k-- // the next batch's first proposal, its apply started
	}
	if k < 1 {
		return nil
	}
	last := indices[k]
	var skip map[uint64]recentProposal
	for k--; k >= 0; k-- {
		i, p := indices[k], w.pending[indices[k]]
		if i+1 != indices[k+1] || !completedAt(p, now) {
			break // below a gap, or one not completed now
		}
		was, ok := w.writtenRecord(i)
		if !ok || !completesOnly(was.p, p) {
			continue // written whole, completed now
		}
		if skip == nil {
			skip = make(map[uint64]recentProposal)
		}
		skip[i] = recentProposal{p: p, size: was.size}
	}
	if len(skip) == 0 {
		return nil
	}
	c := cloneConfiguration(w.heads.config)
	c.AppliesCompletedThrough = max(c.AppliesCompletedThrough, last)
	w.heads.config = c
	return skip
}

// completedAt reports whether p's change was applied at now, complete.
func completedAt(p *Proposal, now *timestamppb.Timestamp) bool {
	ch := p.GetChange()
	return p.GetPhase() == PhaseChange && ch.GetApply() == StatusComplete && sameTime(ch.GetApplied(), now)
}

// completesOnly reports whether p, completed, is was (its record as
// written, committed and not yet applied) with its apply completed and
// nothing else changed: as derivedComplete and completeAt read was's
// record back.
func completesOnly(was, p *Proposal) bool {
	if !awaitsApply(was) {
		return false
	}
	if _, ok := onlyApplyStepDiffers(was, p); !ok {
		return false
	}
	wc, pc := was.GetChange(), p.GetChange()
	started := wc.GetApplyStarted()
	if started == nil {
		started = pc.GetApplied()
	}
	return sameTime(pc.GetApplyStarted(), started) && len(pc.GetApplied().ProtoReflect().GetUnknown()) == 0
}

// sameTime reports whether a and b are set and the same time.
func sameTime(a, b *timestamppb.Timestamp) bool {
	return a != nil && b != nil && a.GetSeconds() == b.GetSeconds() && a.GetNanos() == b.GetNanos() &&
		len(a.ProtoReflect().GetUnknown()) == 0 && len(b.ProtoReflect().GetUnknown()) == 0
}
