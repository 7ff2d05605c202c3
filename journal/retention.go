package journal

import (
	"context"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
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
// Tombstones are kept in the committed and applied values: dropping one is
// only safe when no stored ancestor's value could resurrect the deleted
// path on an index-ordered re-push.
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
				p, err := w.proposal(c, next)
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
			return w.put(keyConfiguration, c)
		})
		total += proposals
		if err != nil || dropped == 0 {
			return total, err
		}
	}
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
		if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, d) }); err != nil {
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
