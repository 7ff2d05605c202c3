package journal

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/openconfig/gnmi/proto/gnmi"
	"google.golang.org/protobuf/proto"
)

// Reads run in their own read-only Badger transaction, concurrently with
// the writer, and see every transition that has returned. Streaming reads
// see one consistent snapshot; their callback must not call back into the
// Journal.

func (j *Journal) view(ctx context.Context, fn func(txn *badger.Txn) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	j.dbMu.RLock()
	defer j.dbMu.RUnlock()
	if j.closing.Load() {
		return ErrClosed
	}
	if err := j.failure(); err != nil {
		return err
	}
	defer func() {
		// Badger can be left with no memtable by a write that failed on
		// the disk (a memtable file it could not create), and a read
		// racing the writer's report of that failure dereferences it:
		// the journal has failed, not the process.
		if r := recover(); r != nil {
			err = j.fail(fmt.Errorf("a read failed inside the database: %v\n%s", r, debug.Stack()))
		}
	}()
	return j.db.View(fn)
}

// scratch is view with a read-write transaction that is discarded: fn may
// write to it to see what a transition would read afterwards.
func (j *Journal) scratch(ctx context.Context, fn func(txn *badger.Txn) error) error {
	return j.view(ctx, func(*badger.Txn) error {
		txn := j.db.NewTransaction(true)
		defer txn.Discard()
		return fn(txn)
	})
}

// Configuration returns the configuration record.
func (j *Journal) Configuration(ctx context.Context) (*Configuration, error) {
	if h, err := j.publishedHeads(ctx); err != nil {
		return nil, err
	} else if h != nil {
		return cloneConfiguration(h.config), nil
	}
	var c *Configuration
	err := j.view(ctx, func(txn *badger.Txn) (err error) {
		c, err = loadConfiguration(txn)
		return err
	})
	return c, err
}

// Mastership returns the mastership term and connection id.
func (j *Journal) Mastership(ctx context.Context) (*Mastership, error) {
	if h, err := j.publishedHeads(ctx); err != nil {
		return nil, err
	} else if h != nil {
		return cloneMastership(h.mastership), nil
	}
	m := &Mastership{}
	err := j.view(ctx, func(txn *badger.Txn) error {
		_, err := getRecord(txn, keyMastership, m)
		return err
	})
	return m, err
}

// CommitConfirm returns the outstanding commit-confirmed (docs/design.md §4), or an
// error wrapping ErrNotFound.
func (j *Journal) CommitConfirm(ctx context.Context) (*CommitConfirm, error) {
	h, err := j.publishedHeads(ctx)
	switch {
	case err != nil:
		return nil, err
	case h != nil && h.confirm == nil:
		return nil, errNoCommitConfirm()
	case h != nil:
		return proto.CloneOf(h.confirm), nil
	}
	var rec *CommitConfirm
	var found bool
	err = j.view(ctx, func(txn *badger.Txn) (err error) {
		rec, found, err = loadCommitConfirm(txn)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errNoCommitConfirm()
	}
	return rec, nil
}

// Proposal returns proposal i: ErrNotFound if it never existed, ErrCompacted
// if retention dropped it.
func (j *Journal) Proposal(ctx context.Context, i uint64) (*Proposal, error) {
	if p, err := j.recentProposal(ctx, i); err != nil {
		return nil, err
	} else if p != nil {
		return shallowProposal(p), nil
	}
	return j.readProposal(ctx, i, loadProposal)
}

// ProposalStatus is Proposal reading only what the guards and the agent's
// decisions look at: the index, the phase, the change's and the
// rollback's statuses, and the change's adopted, adopted_term and
// aborted_by. It skips decoding the operations and values, the bulk of a
// record.
func (j *Journal) ProposalStatus(ctx context.Context, i uint64) (*Proposal, error) {
	p, kept, err := j.keptOrStatus(ctx, i)
	if err != nil || !kept {
		return p, err
	}
	return statusOf(p), nil
}

// ProposalStatusIs reports whether proposal i satisfies is, a predicate on
// what ProposalStatus holds, with ProposalStatus's errors. When the writer
// keeps the record decoded, is reads it itself rather than a status view
// of it (no copy, which a waiting client's Set took at every look): is
// must neither change nor keep it.
func (j *Journal) ProposalStatusIs(ctx context.Context, i uint64, is func(*Proposal) bool) (bool, error) {
	p, _, err := j.keptOrStatus(ctx, i)
	if err != nil {
		return false, err
	}
	return is(p), nil
}

// keptOrStatus returns the writer's kept record of proposal i (kept: not
// a copy, to be neither changed nor kept) or else its status read from
// Badger (loadProposalStatus), with ProposalStatus's errors.
func (j *Journal) keptOrStatus(ctx context.Context, i uint64) (p *Proposal, kept bool, err error) {
	if p, err := j.recentProposal(ctx, i); err != nil || p != nil {
		return p, p != nil, err
	}
	p, err = j.readProposal(ctx, i, loadProposalStatus)
	return p, false, err
}

// recentProposal returns the writer's kept record of proposal i
// (Journal.recent; not a copy) if it has one and the published heads
// say the proposal is kept, else nil. Its error is a read's refusal.
func (j *Journal) recentProposal(ctx context.Context, i uint64) (*Proposal, error) {
	h, err := j.publishedHeads(ctx)
	if err != nil || h == nil || kept(h.config, i) != nil {
		return nil, err
	}
	return j.recent.get(i), nil
}

// readProposal reads proposal i with load (loadProposal or
// loadProposalStatus) in a read transaction.
func (j *Journal) readProposal(ctx context.Context, i uint64, load func(*badger.Txn, *Configuration, uint64) (*Proposal, error)) (*Proposal, error) {
	var p *Proposal
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		p, err = load(txn, c, i)
		return err
	})
	return p, err
}

// Proposals streams the kept proposals with from <= index <= to (to = 0: up
// to the newest) in index order.
func (j *Journal) Proposals(ctx context.Context, from, to uint64, fn func(*Proposal) error) error {
	return j.scanProposals(ctx, from, to, func(v []byte) (*Proposal, error) {
		p := &Proposal{}
		return p, decodeRecord(v, p)
	}, true, fn)
}

// ProposalStatuses is Proposals reading of each proposal only what
// ProposalStatus reads: a caller that counts statuses (the metrics, the
// baseline's check at start) does not decode every operation and value
// of the journal, megabytes per large proposal. A proposal the writer
// still keeps decoded (recent.go) comes whole, which costs nothing: a
// caller reads its status fields and ignores the rest.
func (j *Journal) ProposalStatuses(ctx context.Context, from, to uint64, fn func(*Proposal) error) error {
	return j.scanProposals(ctx, from, to, decodeProposalStatus, false, fn)
}

// scanProposals gives fn the kept proposals with from <= index <= to (to =
// 0: up to the newest) in index order, each as decode makes it of its
// record.
//
// A proposal whose completion a later record holds (derived.go) comes
// complete, with its apply time if withTimes (decode gives whole
// proposals).
func (j *Journal) scanProposals(ctx context.Context, from, to uint64, decode func([]byte) (*Proposal, error), withTimes bool, fn func(*Proposal) error) error {
	if to == 0 {
		to = math.MaxUint64
	}
	h, err := j.publishedHeads(ctx)
	if err != nil {
		return err
	}
	if h != nil {
		// The writer's kept records first, then Badger from the first
		// proposal it keeps none of: each is the proposal's newest
		// durable version, as Badger's snapshot, taken after, has it.
		for _, p := range j.recent.prefix(max(from, h.config.GetFirstIndex(), 1), min(to, h.config.GetLastIndex())) {
			if err := fn(shallowProposal(p)); err != nil {
				return err
			}
			from = p.GetIndex() + 1
		}
		if from > to || from > h.config.GetLastIndex() {
			return nil
		}
	}
	return j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		derived := derivedScan{c: c}
		opts := badger.DefaultIteratorOptions
		opts.Prefix = nsProposal
		opts.PrefetchValues = false // Badger would start a goroutine per record
		it := txn.NewIterator(opts)
		defer it.Close()
		end := proposalKey(to)
		for it.Seek(proposalKey(from)); it.ValidForPrefix(nsProposal); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			if bytes.Compare(item.Key(), end) > 0 {
				break
			}
			var p *Proposal
			err := readValue(item, func(v []byte) (err error) {
				p, err = decode(v)
				return err
			})
			if err != nil {
				return fmt.Errorf("journal: decode %q: %w", item.Key(), err)
			}
			if err := derived.next(p, fn); err != nil {
				return err
			}
		}
		return derived.rest(txn, withTimes, fn)
	})
}

// NewestRollbackable returns the index of the proposal a rollback of "the
// newest change" (index 0 in a request) means, or the reason none can be
// rolled back now (ErrNotFound when no change is in effect, ErrGuard or
// ErrCompacted otherwise; ErrGuard while a commit-confirmed is outstanding,
// as ProposeRollback).
func (j *Journal) NewestRollbackable(ctx context.Context) (uint64, error) {
	var i uint64
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		if c.Committed.Index == 0 {
			return fmt.Errorf("journal: no change is in effect: %w", ErrNotFound)
		}
		if err := commitConfirmGuard(txn, "a commit-confirmed is outstanding",
			"cancel it with the commit extension (or `gnmi-sidecar commit cancel`) instead"); err != nil {
			return err
		}
		p, err := loadProposal(txn, c, c.Committed.Index)
		if err != nil {
			return err
		}
		if err := rollbackGuard(txn, c, p); err != nil {
			return err
		}
		i = c.Committed.Index
		return nil
	})
	return i, err
}

// Committed streams the committed values at and under prefix (nil: all) in
// path-key order, tombstones included (Deleted set).
func (j *Journal) Committed(ctx context.Context, prefix *gnmi.Path, fn func(*PathValue) error) error {
	return j.view(ctx, func(txn *badger.Txn) error {
		return scanValues(ctx, txn, nsCommitted, prefix, decodeTo(fn))
	})
}

// Applied streams the applied values at and under prefix (nil: all) in
// path-key order, tombstones included.
func (j *Journal) Applied(ctx context.Context, prefix *gnmi.Path, fn func(*PathValue) error) error {
	return j.view(ctx, func(txn *badger.Txn) error {
		return scanValues(ctx, txn, nsApplied, prefix, decodeTo(fn))
	})
}

// CommittedAt streams the committed values at and under prefix as they were
// at time t (the History extension): the current values with every change
// made after t undone. Memory is O(changes since t). A t older than the
// history retention kept returns ErrCompacted; a t before the journal's
// first commit yields nothing.
func (j *Journal) CommittedAt(ctx context.Context, t time.Time, prefix *gnmi.Path, fn func(*PathValue) error) error {
	return j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		if floor := c.GetHistoryFloor(); floor != nil && t.Before(floor.AsTime()) {
			return fmt.Errorf("journal: committed configuration at %s: history before %s is no longer kept: %w",
				t.UTC().Format(time.RFC3339Nano), floor.AsTime().Format(time.RFC3339Nano), ErrCompacted)
		}
		undo, err := changesAfter(ctx, txn, t)
		if err != nil {
			return err
		}
		var sub subtree
		if prefix != nil {
			sub = subtreeOf(prefix)
		}
		keys := make([]string, 0, len(undo))
		for k := range undo {
			if prefix == nil || sub.contains([]byte(k)) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		next := 0
		emitUndoneBefore := func(limit []byte) error {
			for ; next < len(keys) && (limit == nil || keys[next] < string(limit)); next++ {
				if pv := undo[keys[next]]; pv != nil {
					if err := fn(pv); err != nil {
						return err
					}
				}
			}
			return nil
		}
		err = scanValues(ctx, txn, nsCommitted, prefix, func(pathKey, val []byte) error {
			if err := emitUndoneBefore(pathKey); err != nil {
				return err
			}
			if next < len(keys) && keys[next] == string(pathKey) {
				pv := undo[keys[next]]
				next++
				if pv == nil {
					return nil
				}
				return fn(pv)
			}
			return decodeTo(fn)(pathKey, val)
		})
		if err != nil {
			return err
		}
		return emitUndoneBefore(nil)
	})
}

// History streams the stored history deltas (every change of the
// committed values: commits, rollback commits, failed applies restoring the
// applied values, retention dropping dead tombstones) whose time t
// satisfies from <= t <= to (a zero to: no upper bound), in the order they
// were made, for the gNMI History extension's time ranges (docs/design.md §4). A
// delta's time never goes back, even when the clock does. A from at or
// before the history floor (Configuration.history_floor: the newest delta
// retention dropped was made then, so the window would miss it) wraps
// ErrCompacted; a to before from wraps ErrInvalid. fn runs in one read
// snapshot and must not call back into the Journal; an error from fn ends
// the stream and is returned.
func (j *Journal) History(ctx context.Context, from, to time.Time, fn func(*HistoryDelta) error) error {
	if !to.IsZero() && to.Before(from) {
		return fmt.Errorf("journal: history from %s to %s: the range ends before it starts: %w",
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano), ErrInvalid)
	}
	return j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		if floor := c.GetHistoryFloor(); floor != nil && !from.After(floor.AsTime()) {
			return fmt.Errorf("journal: history from %s: history up to %s is no longer kept: %w",
				from.UTC().Format(time.RFC3339Nano), floor.AsTime().Format(time.RFC3339Nano), ErrCompacted)
		}
		opts := badger.DefaultIteratorOptions
		opts.Prefix = nsHistory
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(nsHistory); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			d := &HistoryDelta{}
			if err := readValue(it.Item(), func(v []byte) error { return decodeRecord(v, d) }); err != nil {
				return fmt.Errorf("journal: decode %q: %w", it.Item().Key(), err)
			}
			t := d.GetTime().AsTime()
			if t.Before(from) {
				continue
			}
			if !to.IsZero() && t.After(to) {
				return nil // times never go back: the rest are later still
			}
			if err := fn(d); err != nil {
				return err
			}
		}
		return nil
	})
}

// changesAfter returns, for every path changed after t, what it held at t
// (nil: absent).
func changesAfter(ctx context.Context, txn *badger.Txn, t time.Time) (map[string]*PathValue, error) {
	return changesSince(ctx, txn, func(_ uint64, d *HistoryDelta) bool { return d.GetTime().AsTime().After(t) })
}

// scanValues calls fn with the path key and encoded value of every value in
// namespace ns at and under prefix (nil: all), in path-key order.
func scanValues(ctx context.Context, txn *badger.Txn, ns []byte, prefix *gnmi.Path, fn func(pathKey, val []byte) error) error {
	strip := func(key, val []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(key[len(ns):], val)
	}
	if prefix == nil {
		return iteratePrefix(txn, ns, strip)
	}
	sub := subtreeOf(prefix)
	item, err := txn.Get(valueKey(ns, sub.key))
	switch {
	case err == nil:
		if err := readValue(item, func(val []byte) error { return fn(sub.key, val) }); err != nil {
			return err
		}
	case err != badger.ErrKeyNotFound:
		return fmt.Errorf("journal: read %q: %w", sub.key, err)
	}
	for _, p := range sub.prefixes {
		if err := iteratePrefix(txn, valueKey(ns, p), strip); err != nil {
			return err
		}
	}
	return nil
}

func decodeTo(fn func(*PathValue) error) func(pathKey, val []byte) error {
	return func(pathKey, val []byte) error {
		pv := &PathValue{}
		if err := decodeRecord(val, pv); err != nil {
			return fmt.Errorf("journal: decode value of %q: %w", pathKey, err)
		}
		return fn(pv)
	}
}
