package journal

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// Format 1 kept one value per Set path, as sent: a JSON value stood for its
// whole subtree, and a second JSON Update of the same container replaced
// the first in the record although the device merged them. Format 2 keeps
// every value leaf by leaf (package leaves), under new key namespaces.
//
// upgrade brings a format-1 journal to format 2 when it is opened. It
// rebuilds the committed and applied values by replaying every kept
// proposal that took effect, in the order the changes and rollbacks were
// applied, on top of the values of proposals retention dropped
// (decomposed), exactly as format 2 would have recorded them; the
// proposals get their units and their effective and rollback values
// recomputed. It needs every proposal finished: a format-1 journal with
// work in progress is refused, with what to do.
//
// Every step can run again: the format-2 namespaces are rebuilt from
// scratch until the format is flipped, in one transaction, after which
// the format-1 namespaces are dropped (again at the next open if a crash
// came in between).
func (j *Journal) upgrade() error {
	var meta journalpb.Meta
	err := j.db.View(func(txn *badger.Txn) error {
		_, err := getRecord(txn, keyMeta, &meta)
		return err
	})
	if err != nil {
		return err
	}
	if meta.GetFormat() == formatVersion {
		return j.dropRetired()
	}
	if f := meta.GetFormat(); f >= 5 && f <= 7 {
		// Format 5's records are format 6's (format 6 only adds compressed
		// ones), format 6's are format 7's but for the write-order index
		// of the applied values, which format 7 drops, and format 7's are
		// format 8's (whose applies_completed_through is 0 in them); the
		// format moves so that older code no longer opens the journal.
		err := j.update(func(txn *badger.Txn) error {
			w := &writeTxn{txn: txn, now: j.opts.Clock()}
			return w.put(keyMeta, &journalpb.Meta{Format: formatVersion})
		})
		if err != nil {
			return fmt.Errorf("upgrading the journal from format %d to %d: %w", f, formatVersion, err)
		}
		return j.dropRetired()
	}
	if f := meta.GetFormat(); f >= 2 && f <= 4 {
		// Format 2's and 3's records are format 4's, and format 4's are
		// format 5's but for the keys of paths with origin openconfig
		// (upgrade5.go). The format moves, so that older code no longer
		// opens the journal.
		if err := j.upgradeOrigins(f); err != nil {
			return fmt.Errorf("upgrading the journal from format %d to %d: %w", f, formatVersion, err)
		}
		return j.dropRetired()
	}
	start := time.Now()
	u := &upgrader{j: j}
	if err := u.run(); err != nil {
		return fmt.Errorf("upgrading the journal from format 1 to %d: %w", formatVersion, err)
	}
	j.log.Info("journal upgraded from format 1 (values now recorded leaf by leaf)", "format", formatVersion,
		"proposals", u.replayed, "values", u.seeded, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// dropRetired removes what is left of the namespaces older formats
// kept and the current one does not (retiredNamespaces).
func (j *Journal) dropRetired() error {
	left := false
	err := j.db.View(func(txn *badger.Txn) error {
		for _, ns := range retiredNamespaces {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: ns})
			it.Rewind()
			left = left || it.Valid()
			it.Close()
		}
		return nil
	})
	if err != nil || !left {
		return err
	}
	return j.dropPrefix(retiredNamespaces...)
}

type upgrader struct {
	j        *Journal
	c        *Configuration
	dec      *leaves.Decomposer
	replayed int
	seeded   int
}

func (u *upgrader) run() error {
	db := u.j.db
	var proposals []*Proposal
	var seed []*PathValue // format-1 applied values of dropped proposals
	keys := leaves.NewKeys()
	err := db.View(func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		u.c = c
		if c.GetRollingBack() != 0 {
			return unfinished(fmt.Sprintf("the rollback of proposal %d", c.GetRollingBack()))
		}
		for i := max(c.GetFirstIndex(), 1); i <= c.GetLastIndex(); i++ {
			p, err := loadProposal(txn, c, i)
			if err != nil {
				return err
			}
			if !proposalDone(p) {
				return unfinished(fmt.Sprintf("proposal %d", i))
			}
			for _, op := range p.GetChange().GetOps() {
				if op.GetKind() != OpDelete {
					keys.Learn(op.GetPath())
				}
			}
			proposals = append(proposals, p)
		}
		return iteratePrefix(txn, format1Namespaces[1], func(key, val []byte) error {
			pv := &PathValue{}
			if err := decodeRecord(val, pv); err != nil {
				return fmt.Errorf("decode %q: %w: %w", key, err, ErrCorrupt)
			}
			keys.Learn(pv.GetPath())
			if pv.GetIndex() < c.GetFirstIndex() {
				seed = append(seed, pv)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	u.dec = leaves.NewDecomposer(u.j.opts.Schema, keys)
	// The history is rebuilt too: CommittedAt undoes its deltas from the
	// committed values, so they must be of the same kind.
	if err := u.j.dropPrefix(nsCommitted, nsApplied, nsRetiredAppliedIndex, nsAppliedDeleted, nsListKeys, nsHistory); err != nil {
		return err
	}
	u.c.HistorySeq, u.c.HistoryTime = 0, nil
	if err := u.seed(seed); err != nil {
		return err
	}
	if err := u.replay(proposals); err != nil {
		return err
	}
	err = u.j.update(func(txn *badger.Txn) error {
		w := &writeTxn{txn: txn, now: u.j.opts.Clock()}
		if err := w.recordLists(keys.Lists()); err != nil {
			return err
		}
		if err := w.put(keyConfiguration, u.c); err != nil {
			return err
		}
		return w.put(keyMeta, &journalpb.Meta{Format: formatVersion})
	})
	if err != nil {
		return err
	}
	return u.j.dropPrefix(format1Namespaces...)
}

func unfinished(what string) error {
	return fmt.Errorf("%s is not finished; format 1 is upgraded only at rest: run the previous gnmi-sidecar until `gnmi-sidecar journal list` shows every proposal finished, stop it, then start this one (or move the journal directory aside to start afresh): %w", what, ErrFormat)
}

// seedChunk bounds the values of one transaction of the seed.
const seedChunk = 2000

// seed writes the format-1 values of proposals retention dropped, in the
// order they were written (by index, tombstones first), each decomposed
// into units with its index. Their history went with them. A tombstone
// with index 0 (absent before the journal knew the path) is the same as
// nothing.
func (u *upgrader) seed(values []*PathValue) error {
	values = slices.DeleteFunc(values, func(pv *PathValue) bool { return pv.GetDeleted() && pv.GetIndex() == 0 })
	slices.SortStableFunc(values, writeOrder)
	for len(values) > 0 {
		chunk := values[:min(len(values), seedChunk)]
		values = values[len(chunk):]
		err := u.j.update(func(txn *badger.Txn) error {
			w := &writeTxn{txn: txn, now: u.j.opts.Clock()}
			for _, pv := range chunk {
				eff := &effective{values: make(map[string]*PathValue)}
				if pv.GetDeleted() {
					eff.put(PathKey(pv.GetPath()), pv)
				} else {
					units, err := u.units(pv.GetPath(), pv.GetValue(), fmt.Sprintf("the value proposal %d wrote", pv.GetIndex()))
					if err != nil {
						return err
					}
					for _, unit := range units {
						if err := w.writeUnit(eff, pv.GetIndex(), unit); err != nil {
							return err
						}
					}
				}
				if err := u.write(w, eff); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		u.seeded += len(chunk)
	}
	return nil
}

// write stores eff's values as committed and applied, a newer index
// winning over an older one stored already.
func (u *upgrader) write(w *writeTxn, eff *effective) error {
	var applied []*PathValue
	for _, k := range eff.keys {
		pv := eff.values[k]
		old, err := w.value(nsCommitted, []byte(k))
		if err != nil {
			return err
		}
		if old != nil && old.GetIndex() > pv.GetIndex() {
			continue
		}
		if err := w.put(valueKey(nsCommitted, []byte(k)), pv); err != nil {
			return err
		}
		applied = append(applied, pv)
	}
	return w.writeApplied(applied)
}

// units decomposes one format-1 value.
func (u *upgrader) units(p *gnmi.Path, v *gnmi.TypedValue, what string) ([]*Leaf, error) {
	w, err := u.dec.Decompose(p, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; start the sidecar with --yang (the device's YANG modules) to upgrade this journal: %w", what, err, ErrFormat)
	}
	out := make([]*Leaf, len(w.Units))
	for n, unit := range w.Units {
		out[n] = &Leaf{Path: unit.GetPath(), Value: unit.GetVal()}
	}
	return out, nil
}

// event is a change or a rollback that took effect on the device.
type event struct {
	at       time.Time
	p        *Proposal
	rollback bool
}

// replay applies the kept proposals' changes and rollbacks that took
// effect, in the order they were applied, and rewrites the proposals with
// their units and recomputed values.
func (u *upgrader) replay(proposals []*Proposal) error {
	var events []event
	for _, p := range proposals {
		ch := p.GetChange()
		if ch.GetApply() == StatusComplete {
			events = append(events, event{at: ch.GetApplied().AsTime(), p: p})
		}
		if p.GetPhase() == PhaseRollback && p.GetRollback().GetApply() == StatusComplete {
			events = append(events, event{at: p.GetRollback().GetApplied().AsTime(), p: p, rollback: true})
		}
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.GetIndex(), b.p.GetIndex()); c != 0 {
			return c
		}
		return cmp.Compare(boolInt(a.rollback), boolInt(b.rollback))
	})
	var inEffect []uint64 // changes in effect, newest last
	for _, e := range events {
		i := e.p.GetIndex()
		if e.rollback {
			if len(inEffect) == 0 || inEffect[len(inEffect)-1] != i {
				return fmt.Errorf("the rollback of proposal %d is recorded at a time when it was not the newest change in effect (the clock went back?); move the journal directory aside to start afresh: %w", i, ErrFormat)
			}
			inEffect = inEffect[:len(inEffect)-1]
			if err := u.applyRollback(e.p); err != nil {
				return err
			}
			continue
		}
		inEffect = append(inEffect, i)
		if err := u.applyChange(e.p); err != nil {
			return err
		}
	}
	// Changes that never took effect keep their records, with units for
	// what they would have written where their values decompose.
	for _, p := range proposals {
		if p.GetChange().GetApply() == StatusComplete {
			continue
		}
		for _, op := range p.GetChange().GetOps() {
			if u.decomposeOp(op) != nil {
				// Best effort: the op never took effect, so nothing reads
				// its units; leave none rather than a part.
				op.Units, op.ImpliedDeletes = nil, nil
			}
		}
		err := u.j.update(func(txn *badger.Txn) error {
			return (&writeTxn{txn: txn}).put(proposalKey(p.GetIndex()), p)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// decomposeOp sets op's units and implied deletes from its values.
func (u *upgrader) decomposeOp(op *Op) error {
	op.Units, op.ImpliedDeletes = nil, nil
	if op.GetKind() == OpDelete {
		return nil
	}
	for _, leaf := range op.GetValues() {
		w, err := u.dec.Decompose(leaf.GetPath(), leaf.GetValue())
		if err != nil {
			return err
		}
		op.ImpliedDeletes = append(op.ImpliedDeletes, w.Deletes...)
		for _, unit := range w.Units {
			op.Units = append(op.Units, &Leaf{Path: unit.GetPath(), Value: unit.GetVal()})
		}
	}
	return nil
}

// applyChange replays change p as CommitChange and CompleteApply would
// have in format 2: its effective values go into the committed and applied
// values, and its record gets them and the rollback values.
func (u *upgrader) applyChange(p *Proposal) error {
	for _, op := range p.GetChange().GetOps() {
		if err := u.decomposeOp(op); err != nil {
			if errors.Is(err, leaves.ErrNeedSchema) || errors.Is(err, leaves.ErrInvalid) {
				return fmt.Errorf("proposal %d: %w; start the sidecar with --yang (the device's YANG modules) to upgrade this journal: %w", p.GetIndex(), err, ErrFormat)
			}
			return err
		}
	}
	err := u.j.update(func(txn *badger.Txn) error {
		w := &writeTxn{txn: txn, now: p.GetChange().GetCommitted().AsTime()}
		i := p.GetIndex()
		eff, err := w.expand(i, p.GetChange().GetOps())
		if err != nil {
			return err
		}
		values := make([]*PathValue, 0, len(eff.keys))
		var rollback []*PathValue
		var history []*journalpb.HistoryEntry
		for _, k := range eff.keys {
			pv := eff.values[k]
			prev, err := w.value(nsCommitted, []byte(k))
			if err != nil {
				return err
			}
			history = append(history, &journalpb.HistoryEntry{Before: prev, After: pv})
			rollback = append(rollback, rollbackValue(prev, pv))
			values = append(values, pv)
			if err := w.put(valueKey(nsCommitted, []byte(k)), pv); err != nil {
				return err
			}
		}
		if err := w.writeApplied(values); err != nil {
			return err
		}
		if err := w.appendHistory(u.c, i, HistoryKindCommitChange, history); err != nil {
			return err
		}
		p.Change.Values = values
		if p.Rollback == nil {
			p.Rollback = &Rollback{}
		}
		p.Rollback.Values = rollback
		if err := w.put(keyConfiguration, u.c); err != nil {
			return err
		}
		return w.put(proposalKey(i), p)
	})
	if err != nil {
		return err
	}
	u.replayed++
	return nil
}

// applyRollback replays the rollback of p as CommitRollback and
// CompleteApplyRollback would have: its values (recomputed by
// applyChange) go into the committed and applied values.
func (u *upgrader) applyRollback(p *Proposal) error {
	return u.j.update(func(txn *badger.Txn) error {
		w := &writeTxn{txn: txn, now: p.GetRollback().GetCommitted().AsTime()}
		values := p.GetRollback().GetValues()
		history := make([]*journalpb.HistoryEntry, 0, len(values))
		for _, pv := range values {
			key := PathKey(pv.GetPath())
			prev, err := w.value(nsCommitted, key)
			if err != nil {
				return err
			}
			history = append(history, &journalpb.HistoryEntry{Before: prev, After: pv})
			if err := w.put(valueKey(nsCommitted, key), pv); err != nil {
				return err
			}
		}
		if err := w.writeApplied(values); err != nil {
			return err
		}
		if err := w.appendHistory(u.c, p.GetIndex(), HistoryKindCommitRollback, history); err != nil {
			return err
		}
		return w.put(keyConfiguration, u.c)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
