package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

// retentionSlice bounds one retention transaction: it drops at most this
// many proposals and this many history deltas, and visits (reads, or
// steps over) at most this many history entries, live or deleted, so
// that the client transitions sharing or queued behind it wait for a
// bounded amount of work (docs/bench.md, "Soak": what retention costs
// per proposal it drops, and the longest slice). tombstoneSlice
// bounds the tombstones one transaction re-checks and drops: each costs a
// few reads per ancestor path and four deletes.
const (
	retentionSlice = 64
	tombstoneSlice = 32
)

// sliceStats is what one retention transaction did, for its caller and
// for tests of the bound.
type sliceStats struct {
	proposals int // proposal records dropped
	deltas    int // history deltas dropped
	// visited counts the history entries the slice's scan stepped on,
	// every version, deleted or not: what the scan costs, dead entries
	// included.
	visited int
	// dead counts the visited entries that were deleted before (or older
	// versions): work spent on what retention already dropped.
	dead int
	// historyFrom is where the slice's history scan started; historyNext
	// where the next slice's starts once this one is durable: every entry
	// before it is deleted.
	historyFrom, historyNext uint64
}

// Compact applies retention now: it drops the oldest proposal records beyond
// the newest Options.Retain, oldest first, stopping at the first one that is
// not finished (its commit, apply and any rollback steps). Their effect stays
// in the configuration. History deltas of dropped proposals go too, which
// moves the point-in-time floor of CommittedAt. It runs in slices of one
// transaction each (retentionSlice) and returns how many proposals it
// dropped.
//
// It never reads again what it dropped before: proposals are dropped from
// the configuration's FirstIndex, history deltas from historyHead, the
// first seq not yet dropped. Badger keeps a deleted key until its own
// compaction rewrites the table holding it, so a scan from the start of a
// prefix would step over every key dropped since.
//
// Then it drops the tombstones that dropped proposals left behind (see
// dropTombstones), so deleting paths does not grow the journal for ever.
func (j *Journal) Compact(ctx context.Context) (int, error) {
	if j.opts.Retain < 0 {
		return 0, nil
	}
	total := 0
	for {
		var st sliceStats
		err := j.submit(ctx, func(w *writeTxn) (err error) {
			if st, err = j.compactSlice(w); err == nil {
				w.historyNext = max(w.historyNext, st.historyNext)
			}
			return err
		})
		if err != nil {
			return total, err
		}
		if j.opts.onSlice != nil {
			j.opts.onSlice(st)
		}
		total += st.proposals
		if st.proposals+st.deltas == 0 && st.historyNext <= st.historyFrom {
			return total, j.dropTombstones(ctx)
		}
	}
}

// advanceHistoryHead moves retention's history cursor to next, once the
// transaction whose slice deleted every entry before it is durable: before
// the writer's next transaction, so that no slice, whoever asked for it,
// scans again what an earlier one deleted.
func (j *Journal) advanceHistoryHead(next uint64) {
	for {
		head := j.historyHead.Load()
		if next <= head || j.historyHead.CompareAndSwap(head, next) {
			return
		}
	}
}

// compactSlice drops, in w, the oldest finished proposals beyond the
// newest Options.Retain and the history deltas of dropped proposals, at
// most retentionSlice of each.
func (j *Journal) compactSlice(w *writeTxn) (sliceStats, error) {
	var st sliceStats
	c, err := w.configuration()
	if err != nil {
		return st, err
	}
	retain := uint64(j.opts.Retain)
	if c.LastIndex <= retain {
		return st, nil
	}
	keepFrom := c.LastIndex - retain + 1
	next := c.FirstIndex
	for ; next < keepFrom && next-c.FirstIndex < retentionSlice; next++ {
		done, err := w.proposalDoneToDrop(c, next)
		if err != nil {
			return st, err
		}
		if !done {
			break
		}
	}
	// The cursor as the slices before this one left it, those of this
	// transaction included (runBatch moves it once the transaction is
	// durable).
	st.historyFrom = max(j.historyHead.Load(), w.historyNext)
	deltas, floor, historyNext, err := oldHistory(w.txn, st.historyFrom, next, &st)
	if err != nil {
		return st, err
	}
	st.historyNext = historyNext
	if next == c.FirstIndex && len(deltas) == 0 {
		return st, nil
	}
	for k := c.FirstIndex; k < next; k++ {
		if err := w.delete(proposalKey(k)); err != nil {
			return st, err
		}
	}
	for _, seq := range deltas {
		if err := w.delete(historyKey(seq)); err != nil {
			return st, err
		}
	}
	if floor != nil {
		c.HistoryFloor = floor.GetTime()
	}
	st.proposals, st.deltas = int(next-c.FirstIndex), len(deltas)
	c.FirstIndex = next
	if err := w.put(keyConfiguration, c); err != nil {
		return st, err
	}
	w.emit(Event{Action: ActionCompact, Configuration: c})
	return st, nil
}

// dropTombstones removes the applied tombstones written by proposals that
// retention dropped (index < FirstIndex), with their committed twins, once
// they no longer mean anything: a re-push replays the values under an
// opaque value (such as ASCII configuration, which may hold the deleted
// path) in index order (ReplayApplied), so a tombstone matters only while
// a value stored at an ancestor path, other than a marker, was written
// before it; such a tombstone is kept. Entries of the tombstone index
// (lt/) whose tombstone a later value replaced are removed too (the
// writer leaves them). Candidates are found in a read transaction and
// re-checked by the write, so the writer is held only for the ones found,
// tombstoneSlice at a time.
//
// The scan starts at tombstonesFrom, the FirstIndex of the last scan that
// ran to its end: tombstones of writers before it were checked then (and
// those dropped are not stepped over again). One kept then is checked
// again only after the journal is reopened, which starts the cursor at 0.
func (j *Journal) dropTombstones(ctx context.Context) error {
	from := uint64Key(nsAppliedDeleted, j.tombstonesFrom.Load())
	for {
		var firstIndex uint64
		var candidates [][]byte // at/ keys
		err := j.view(ctx, func(txn *badger.Txn) error {
			c, err := loadConfiguration(txn)
			if err != nil {
				return err
			}
			firstIndex = c.FirstIndex
			it := txn.NewIterator(badger.IteratorOptions{Prefix: nsAppliedDeleted})
			defer it.Close()
			for it.Seek(from); it.ValidForPrefix(nsAppliedDeleted) && len(candidates) < tombstoneSlice; it.Next() {
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
		if err != nil {
			return err
		}
		if len(candidates) == 0 {
			j.tombstonesFrom.Store(firstIndex)
			return nil
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
				applied, err := w.value(nsApplied, pathKey)
				if err != nil {
					return err
				}
				if applied == nil || !applied.GetDeleted() || applied.GetIndex() != index {
					// A later value replaced the tombstone: only its index
					// entry is left (writeApplied leaves it).
					if err := w.delete(candidate); err != nil {
						return err
					}
					continue
				}
				committed, ok, err := w.droppableTombstone(c, pathKey, applied)
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
		if err != nil {
			return err
		}
		if len(candidates) < tombstoneSlice {
			j.tombstonesFrom.Store(firstIndex)
			return nil
		}
		last := candidates[len(candidates)-1]
		from = append(slices.Clip(last), 0) // the next key after it
	}
}

// droppableTombstone reports whether applied, the applied tombstone at
// pathKey, may be dropped, and returns its committed twin.
func (w *writeTxn) droppableTombstone(c *Configuration, pathKey []byte, applied *PathValue) (*PathValue, bool, error) {
	index := applied.GetIndex()
	if index >= c.FirstIndex {
		return nil, false, nil
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

// oldHistory returns the seqs of the oldest history deltas from seq from
// on written for proposals before firstKept (stopping at the first one
// that is not), the newest of them (its time and proposal only: retention
// reads nothing else of a delta, so none of their entries is decoded), and
// the seq the next scan may start from: past the deltas returned and the
// deleted entries stepped over. It steps on at most retentionSlice
// entries, counted in st.visited: it iterates every version so that
// deleted entries, which Badger would skip unseen, count too.
func oldHistory(txn *badger.Txn, from, firstKept uint64, st *sliceStats) (seqs []uint64, last *journalpb.HistoryDeltaHead, next uint64, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: nsHistory, AllVersions: true})
	defer it.Close()
	next = from
	var prev []byte // the previous entry's key: a second version of it is an older one
	for it.Seek(historyKey(from)); it.ValidForPrefix(nsHistory) && st.visited < retentionSlice; it.Next() {
		st.visited++
		item := it.Item()
		older := bytes.Equal(item.Key(), prev)
		prev = item.KeyCopy(prev[:0])
		if older || item.IsDeletedOrExpired() {
			st.dead++
			next = max(next, historySeq(item.Key())+1)
			continue
		}
		seq, d, err := decodeDeltaHead(item)
		if err != nil {
			return nil, nil, 0, err
		}
		if d.GetProposal() >= firstKept {
			break
		}
		seqs = append(seqs, seq)
		last = d
		next = seq + 1
	}
	return seqs, last, next, nil
}

func historySeq(key []byte) uint64 { return binary.BigEndian.Uint64(key[len(nsHistory):]) }

// firstHistorySeq is the seq of the oldest history delta stored, or
// HistorySeq+1 if there is none: where retention's history cursor starts
// when the journal is opened.
func firstHistorySeq(db *badger.DB) (uint64, error) {
	var first uint64
	err := db.View(func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: nsHistory})
		defer it.Close()
		it.Rewind()
		if !it.Valid() {
			first = c.GetHistorySeq() + 1
			return nil
		}
		first = historySeq(it.Item().Key())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("journal: the oldest history delta: %w", err)
	}
	return first, nil
}
