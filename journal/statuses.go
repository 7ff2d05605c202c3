package journal

import (
	"fmt"
	"sync"
)

// heldStatuses are the statuses of the proposal records the writer's
// durable transactions wrote (or completed without writing, derived.go),
// a few bytes each, for retention: it drops a proposal only once every
// step of it is finished, and the proposals it drops are Options.Retain
// behind the newest, long gone from recentProposals. Reading each one's
// status from Badger (a value-log read, a checksum and a decode per
// proposal) was about 3 % of the writer's CPU per Set at 64 clients
// (docs/bench.md, "Retention without reading what it drops").
//
// A status held is that of the record's newest durable version, or, for
// a change completed without its record being written again, the
// completed one the writer holds (done applies the derivation from
// AppliesCompletedThrough, which only grows, to either, as
// loadProposalStatus does): a transaction that writes or deletes a
// proposal's record replaces or drops its status once it is durable, as
// it does for recentProposals, and only the writer reads them, after its
// own transaction's writes (writeTxn.recentProposal). A proposal without a status held is read
// from Badger: those written before Open, and those beyond
// heldStatusesMax.
type heldStatuses struct {
	mu      sync.Mutex
	byIndex map[uint64]heldStatus
}

// heldStatusesMax bounds the statuses held (about 20 bytes each): a
// journal that retains more proposals than this reads the others'.
const heldStatusesMax = 1 << 16

// heldStatus is what proposalDone reads of a proposal record.
type heldStatus struct {
	phase                                        uint8
	commit, apply, rollbackCommit, rollbackApply uint8
}

// heldStatusOf is p's heldStatus; false for a record with a phase or a
// status this format does not know (it is read from Badger).
func heldStatusOf(p *Proposal) (heldStatus, bool) {
	ch, rb := p.GetChange(), p.GetRollback()
	values := [...]int32{int32(p.GetPhase()), int32(ch.GetCommit()), int32(ch.GetApply()),
		int32(rb.GetCommit()), int32(rb.GetApply())}
	for _, v := range values {
		if v < 0 || v > int32(StatusFailed) {
			return heldStatus{}, false
		}
	}
	return heldStatus{phase: uint8(values[0]), commit: uint8(values[1]), apply: uint8(values[2]),
		rollbackCommit: uint8(values[3]), rollbackApply: uint8(values[4])}, true
}

// done is proposalDone of proposal i's record with status s, under
// configuration c.
func (s heldStatus) done(c *Configuration, i uint64) bool {
	var ch Change
	var rb Rollback
	p := Proposal{Change: &ch, Rollback: &rb}
	s.view(&p, c, i)
	return proposalDone(&p)
}

// view sets p, an empty proposal with an empty change and rollback, to
// proposal i's status view with status s, as read under c.
func (s heldStatus) view(p *Proposal, c *Configuration, i uint64) {
	p.Change.Commit, p.Change.Apply = Status(s.commit), Status(s.apply)
	p.Rollback.Commit, p.Rollback.Apply = Status(s.rollbackCommit), Status(s.rollbackApply)
	p.Index, p.Phase = i, Phase(s.phase)
	if derivedComplete(c, p) {
		completeAt(p, nil)
	}
}

// get returns proposal i's status, if held.
func (h *heldStatuses) get(i uint64) (heldStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.byIndex[i]
	return s, ok
}

// add records the statuses of the records a durable transaction wrote
// (an entry without a record: deleted).
func (h *heldStatuses) add(written map[uint64]recentProposal) {
	if len(written) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byIndex == nil {
		h.byIndex = make(map[uint64]heldStatus)
	}
	for i, e := range written {
		s, ok := heldStatus{}, false
		if e.p != nil {
			s, ok = heldStatusOf(e.p)
		}
		_, held := h.byIndex[i]
		switch {
		case !ok:
			delete(h.byIndex, i)
		case held || len(h.byIndex) < heldStatusesMax:
			h.byIndex[i] = s
		}
	}
}

// clear forgets every status.
func (h *heldStatuses) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.byIndex)
}

// proposalDoneToDrop reports whether proposal i, kept under c, is done
// (proposalDone), for retention: from this transaction's writes or the
// records the writer keeps, else from the statuses it holds, else read.
func (w *writeTxn) proposalDoneToDrop(c *Configuration, i uint64) (bool, error) {
	if w.recentProposal(i) == nil && w.statuses != nil {
		if s, ok := w.statuses.get(i); ok {
			done := s.done(c, i)
			if checkSharedValues {
				p, err := loadProposalStatus(w.txn, c, i)
				if err != nil {
					return false, err
				}
				if proposalDone(p) != done {
					panic(fmt.Sprintf("journal: proposal %d: held status %+v says done %v, its record %v", i, s, done, p))
				}
			}
			return done, nil
		}
	}
	p, err := w.proposalStatusView(c, i)
	if err != nil {
		return false, err
	}
	return proposalDone(p), nil
}
