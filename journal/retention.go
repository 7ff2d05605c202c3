package journal

import (
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// compactChunk bounds the proposals (and history deltas) one retention
// transaction drops.
const compactChunk = 1000

// Compact applies retention now: it drops the oldest proposal records beyond
// the newest Options.Retain, oldest first, stopping at the first one that is
// not finished (its commit, apply and any rollback steps). Their effect stays
// in the configuration. History deltas of dropped proposals go too, which
// moves the point-in-time floor of CommittedAt. It runs in chunks of one
// transaction each and returns how many proposals it dropped.
//
// Then it drops the tombstones that dropped proposals left behind (see
// dropTombstones), so deleting paths does not grow the journal for ever.
func (j *Journal) Compact(ctx context.Context) (int, error) {
	if j.opts.Retain < 0 {
		return 0, nil
	}
	retain := uint64(j.opts.Retain)
	total := 0
	for {
		dropped, proposals := 0, 0
		err := j.submit(ctx, func(w *writeTxn) error {
			dropped, proposals = 0, 0
			c, err := w.configuration()
			if err != nil {
				return err
			}
			if c.LastIndex <= retain {
				return nil
			}
			keepFrom := c.LastIndex - retain + 1
			next := c.FirstIndex
			for ; next < keepFrom && next-c.FirstIndex < compactChunk; next++ {
				p, err := loadProposalStatus(w.txn, c, next)
				if err != nil {
					return err
				}
				if !proposalDone(p) {
					break
				}
			}
			deltas, floor, err := oldHistory(w.txn, next)
			if err != nil {
				return err
			}
			if next == c.FirstIndex && len(deltas) == 0 {
				return nil
			}
			for k := c.FirstIndex; k < next; k++ {
				if err := w.delete(proposalKey(k)); err != nil {
					return err
				}
			}
			for _, key := range deltas {
				if err := w.delete(key); err != nil {
					return err
				}
			}
			if floor != nil {
				c.HistoryFloor = floor.GetTime()
			}
			proposals = int(next - c.FirstIndex)
			dropped = proposals + len(deltas)
			c.FirstIndex = next
			if err := w.put(keyConfiguration, c); err != nil {
				return err
			}
			w.emit(Event{Action: ActionCompact, Configuration: c})
			return nil
		})
		total += proposals
		if err != nil {
			return total, err
		}
		if dropped == 0 {
			return total, j.dropTombstones(ctx)
		}
	}
}

// dropTombstones removes the applied tombstones written by proposals that
// retention dropped (index < FirstIndex), with their committed twins, once
// they no longer mean anything: a re-push replays values in index order, so
// a tombstone matters only while a value stored at an ancestor path (an
// opaque value, such as ASCII configuration, that may hold the deleted
// path) was written before it; such a tombstone is kept. A marker ({} at a
// list entry or container) holds nothing. Candidates are found in a read transaction and re-checked by the
// write, so the writer is held only for the ones found, chunk by chunk.
func (j *Journal) dropTombstones(ctx context.Context) error {
	from := nsAppliedDeleted
	for {
		var candidates [][]byte // at/ keys
		err := j.view(ctx, func(txn *badger.Txn) error {
			c, err := loadConfiguration(txn)
			if err != nil {
				return err
			}
			opts := badger.DefaultIteratorOptions
			opts.Prefix = nsAppliedDeleted
			opts.PrefetchValues = false
			it := txn.NewIterator(opts)
			defer it.Close()
			for it.Seek(from); it.ValidForPrefix(nsAppliedDeleted) && len(candidates) < compactChunk; it.Next() {
				index, _, err := splitIndexKey(nsAppliedDeleted, it.Item().Key())
				if err != nil {
					return fmt.Errorf("journal: %w", err)
				}
				if index >= c.FirstIndex {
					break
				}
				candidates = append(candidates, it.Item().KeyCopy(nil))
			}
			return nil
		})
		if err != nil || len(candidates) == 0 {
			return err
		}
		err = j.submit(ctx, func(w *writeTxn) error {
			c, err := w.configuration()
			if err != nil {
				return err
			}
			var history []*journalpb.HistoryEntry
			for _, candidate := range candidates {
				index, pathKey, err := splitIndexKey(nsAppliedDeleted, candidate)
				if err != nil {
					return err
				}
				committed, ok, err := w.droppableTombstone(c, index, pathKey)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				if err := w.deleteTombstone(index, pathKey); err != nil {
					return err
				}
				history = append(history, &journalpb.HistoryEntry{Before: committed})
			}
			if len(history) == 0 {
				return nil
			}
			// Filed under the newest proposal, so history compaction drops
			// it (and moves the point-in-time floor past it) only once
			// every proposal journaled before it is gone.
			if err := w.appendHistory(c, c.LastIndex, HistoryKindDropTombstones, history); err != nil {
				return err
			}
			return w.put(keyConfiguration, c)
		})
		if err != nil || len(candidates) < compactChunk {
			return err
		}
		last := candidates[len(candidates)-1]
		from = append(slices.Clip(last), 0) // the next key after it
	}
}

// droppableTombstone reports whether the applied tombstone at pathKey,
// written by proposal index, may be dropped, and returns its committed twin.
func (w *writeTxn) droppableTombstone(c *Configuration, index uint64, pathKey []byte) (*PathValue, bool, error) {
	applied, err := w.value(nsApplied, pathKey)
	if err != nil || applied == nil || !applied.GetDeleted() || applied.GetIndex() != index || index >= c.FirstIndex {
		return nil, false, err
	}
	committed, err := w.value(nsCommitted, pathKey)
	if err != nil || !proto.Equal(committed, applied) {
		return nil, false, err // committed has moved on: leave both for now
	}
	for _, a := range ancestors(applied.GetPath()) {
		holder, err := w.value(nsApplied, PathKey(a))
		if err != nil {
			return nil, false, err
		}
		if holder != nil && !holder.GetDeleted() && holder.GetIndex() < index && !leaves.IsMarker(holder.GetValue()) {
			return nil, false, nil
		}
	}
	return committed, true, nil
}

func (w *writeTxn) deleteTombstone(index uint64, pathKey []byte) error {
	for _, key := range [][]byte{
		valueKey(nsApplied, pathKey),
		valueKey(nsCommitted, pathKey),
		appliedIndexKey(index, pathKey),
		appliedTombstoneKey(index, pathKey),
	} {
		if err := w.delete(key); err != nil {
			return err
		}
	}
	return nil
}

// ancestors returns the paths whose stored value may hold p's data: every
// proper prefix of p (the root included) and, for an element with list
// keys, the whole list (the element without its keys).
func ancestors(p *gnmi.Path) []*gnmi.Path {
	elems := p.GetElem()
	var out []*gnmi.Path
	for n, e := range elems {
		out = append(out, &gnmi.Path{Origin: p.GetOrigin(), Elem: elems[:n]})
		if len(e.GetKey()) > 0 {
			list := append(slices.Clone(elems[:n]), &gnmi.PathElem{Name: e.GetName()})
			out = append(out, &gnmi.Path{Origin: p.GetOrigin(), Elem: list})
		}
	}
	return out
}

// oldHistory returns the keys of the oldest history deltas written for
// proposals before firstKept (stopping at the first one that is not), and
// the newest of them.
func oldHistory(txn *badger.Txn, firstKept uint64) ([][]byte, *journalpb.HistoryDelta, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = nsHistory
	it := txn.NewIterator(opts)
	defer it.Close()
	var keys [][]byte
	var last *journalpb.HistoryDelta
	for it.Seek(nsHistory); it.ValidForPrefix(nsHistory) && len(keys) < compactChunk; it.Next() {
		d := &journalpb.HistoryDelta{}
		if err := readValue(it.Item(), func(v []byte) error { return proto.Unmarshal(v, d) }); err != nil {
			return nil, nil, err
		}
		if d.GetProposal() >= firstKept {
			break
		}
		keys = append(keys, it.Item().KeyCopy(nil))
		last = d
	}
	return keys, last, nil
}
