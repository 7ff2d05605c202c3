package journal

// Checkpoints: named points of the committed configuration's history
// (tags) and the change that goes back to one (ProposeRestore, the
// operator's `gnmi-sidecar rollback --to TAG|INDEX`).
//
// A point is a position in the history deltas (h/<seq>): the committed
// configuration after delta seq. Going back to it writes, as one change,
// what every path changed by a later delta held at the point, so the
// device receives it as one SetRequest and the journal records it as one
// proposal, which can itself be rolled back like any change.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gnmi-sidecar/gnmi-sidecar/gnmipath"
	"github.com/gnmi-sidecar/gnmi-sidecar/journal/journalpb"
	"github.com/gnmi-sidecar/gnmi-sidecar/leaves"
)

type (
	// Tag is a named point of the journal (CreateTag).
	Tag = journalpb.Tag
	// Restore is the point a restoring change goes back to
	// (Change.restores).
	Restore = journalpb.Restore
)

var (
	// ErrExists: the record to create exists already (a tag name in use).
	// Nothing was written.
	ErrExists = errors.New("already exists")
	// ErrNoChange: going back to a point would change nothing: the
	// committed configuration is as it was there. Nothing was written.
	ErrNoChange = errors.New("nothing to change")
)

var nsTag = []byte("tg/")

func tagKey(name string) []byte { return append(append([]byte{}, nsTag...), name...) }

// tagName is what a tag may be called: a letter or digit, then letters,
// digits, '.', '_' or '-'; 64 characters at most. A name of digits only
// would read as a proposal index in `rollback --to`, so it is refused.
var tagName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidateTagName refuses, wrapping ErrInvalid, a name a tag cannot have.
func ValidateTagName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("journal: a tag needs a name: %w", ErrInvalid)
	case !tagName.MatchString(name):
		return fmt.Errorf("journal: tag name %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit: %w", name, ErrInvalid)
	case allDigits(name):
		return fmt.Errorf("journal: tag name %q is a number, which would read as a proposal index: add a letter: %w", name, ErrInvalid)
	}
	return nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Point names a point of the committed configuration's history.
type Point struct {
	// Tag, if set, is the point the tag names.
	Tag string
	// Index, without Tag and Latest: right after proposal Index's change
	// was committed; 0: before the journal's first change.
	Index uint64
	// Latest: the committed configuration now.
	Latest bool
}

// String describes the point for messages.
func (p Point) String() string {
	switch {
	case p.Tag != "":
		return fmt.Sprintf("tag %q", p.Tag)
	case p.Latest:
		return "the committed configuration now"
	case p.Index == 0:
		return "before the journal's first change"
	}
	return fmt.Sprintf("proposal %d", p.Index)
}

// resolvedPoint is a point located in the history.
type resolvedPoint struct {
	seq   uint64    // the configuration after history delta seq (0: before any)
	index uint64    // Tag.index
	time  time.Time // a History snapshot at this time reads the point
	tag   string
	// oldest is, when resolving the point looked it up, the seq of the
	// oldest history delta kept (HistorySeq+1: none); 0: not looked up.
	oldest uint64
}

// resolvePoint locates pt in the history of txn.
func resolvePoint(ctx context.Context, txn *badger.Txn, c *Configuration, pt Point, now time.Time) (resolvedPoint, error) {
	switch {
	case pt.Tag != "":
		t := &Tag{}
		found, err := getRecord(txn, tagKey(pt.Tag), t)
		if err != nil {
			return resolvedPoint{}, fmt.Errorf("journal: %w", err)
		}
		if !found {
			return resolvedPoint{}, fmt.Errorf("journal: no tag %q (gnmi-sidecar journal tags lists them): %w", pt.Tag, ErrNotFound)
		}
		return resolvedPoint{seq: t.GetHistorySeq(), index: t.GetIndex(), time: t.GetTime().AsTime(), tag: t.GetName()}, nil
	case pt.Latest:
		at := now
		if ht := c.GetHistoryTime(); ht != nil {
			at = ht.AsTime()
		}
		return resolvedPoint{seq: c.GetHistorySeq(), index: c.GetCommitted().GetIndex(), time: at}, nil
	case pt.Index == 0:
		oldest, first, err := firstDelta(txn, c)
		if err != nil {
			return resolvedPoint{}, err
		}
		at := now
		if first != nil {
			at = first.GetTime().AsTime().Add(-time.Nanosecond)
		}
		return resolvedPoint{seq: 0, index: 0, time: at, oldest: oldest}, nil
	}
	i := pt.Index
	if i > c.GetLastIndex() {
		return resolvedPoint{}, fmt.Errorf("journal: proposal %d does not exist (the newest is %d): %w", i, c.GetLastIndex(), ErrNotFound)
	}
	if i < c.GetFirstIndex() {
		return resolvedPoint{}, fmt.Errorf("journal: proposal %d is older than what retention keeps (%d to %d): %w",
			i, c.GetFirstIndex(), c.GetLastIndex(), ErrCompacted)
	}
	p, err := loadProposalStatus(txn, c, i)
	if err != nil {
		return resolvedPoint{}, err
	}
	if p.GetChange().GetCommit() != StatusComplete {
		return resolvedPoint{}, guardf("proposal %d's change was not committed (commit %s): name a proposal whose change was",
			i, statusName(p.GetChange().GetCommit()))
	}
	// Commits happen in index order, so their deltas do: walk back from
	// the newest to proposal i's commit.
	var found *resolvedPoint
	err = newestFirst(ctx, txn, func(seq uint64, d *HistoryDelta) bool {
		if d.GetKind() != HistoryKindCommitChange {
			return true
		}
		if d.GetProposal() == i {
			found = &resolvedPoint{seq: seq, index: i, time: d.GetTime().AsTime()}
		}
		return d.GetProposal() > i
	})
	switch {
	case err != nil:
		return resolvedPoint{}, err
	case found != nil:
		return *found, nil
	}
	// Its commit changed nothing (a wildcard delete that matched
	// nothing): the point is the newest change made before it.
	full, err := loadProposal(txn, c, i)
	if err != nil {
		return resolvedPoint{}, err
	}
	at := full.GetChange().GetCommitted().AsTime()
	rp := resolvedPoint{index: i, time: at}
	err = newestFirst(ctx, txn, func(seq uint64, d *HistoryDelta) bool {
		if d.GetTime().AsTime().After(at) {
			return true
		}
		rp.seq = seq
		return false
	})
	return rp, err
}

// newestFirst calls fn with the history deltas, newest first, while it
// returns true.
func newestFirst(ctx context.Context, txn *badger.Txn, fn func(seq uint64, d *HistoryDelta) bool) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = nsHistory
	opts.Reverse = true
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(historyKey(math.MaxUint64)); it.ValidForPrefix(nsHistory); it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		seq, d, err := decodeDelta(it.Item())
		if err != nil {
			return err
		}
		if !fn(seq, d) {
			return nil
		}
	}
	return nil
}

// statusName is a status as the operator reads it (COMPLETE, FAILED, ...).
func statusName(s Status) string {
	name := journalpb.Status_name[int32(s)]
	if len(name) > len("STATUS_") {
		return name[len("STATUS_"):]
	}
	return name
}

// decodeDelta decodes the history delta of an h/<seq> item, with its seq.
func decodeDelta(item *badger.Item) (uint64, *HistoryDelta, error) {
	d := &HistoryDelta{}
	seq, err := decodeDeltaWith(proto.UnmarshalOptions{}, item, d)
	if err != nil {
		return 0, nil, err
	}
	return seq, d, nil
}

// decodeDeltaHead is decodeDelta for a delta's time and proposal only
// (HistoryDeltaHead): its entries, the values of a whole Set, are skipped.
func decodeDeltaHead(item *badger.Item) (uint64, *journalpb.HistoryDeltaHead, error) {
	d := &journalpb.HistoryDeltaHead{}
	seq, err := decodeDeltaWith(proto.UnmarshalOptions{DiscardUnknown: true}, item, d)
	if err != nil {
		return 0, nil, err
	}
	return seq, d, nil
}

// decodeDeltaWith decodes the history delta record item into d (a
// HistoryDelta or a view of one) and returns its seq.
func decodeDeltaWith(opts proto.UnmarshalOptions, item *badger.Item, d proto.Message) (uint64, error) {
	key := item.Key()
	if len(key) != len(nsHistory)+8 {
		return 0, fmt.Errorf("journal: history key %q: not %s<8-byte seq>", key, nsHistory)
	}
	if err := readValue(item, func(v []byte) error { return decodeRecordWith(opts, v, d) }); err != nil {
		return 0, fmt.Errorf("journal: decode %q: %w", key, err)
	}
	return binary.BigEndian.Uint64(key[len(nsHistory):]), nil
}

// firstDelta returns the oldest history delta kept and its seq (nil and
// c's HistorySeq+1: none).
func firstDelta(txn *badger.Txn, c *Configuration) (uint64, *HistoryDelta, error) {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = nsHistory
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Rewind()
	if !it.ValidForPrefix(nsHistory) {
		return c.GetHistorySeq() + 1, nil, nil
	}
	return decodeDelta(it.Item())
}

// restorable refuses, wrapping ErrCompacted, a point some of whose later
// history retention dropped: going back to it would miss those changes.
func restorable(txn *badger.Txn, c *Configuration, rp resolvedPoint, what string) error {
	if rp.seq >= c.GetHistorySeq() {
		return nil
	}
	oldest := rp.oldest
	if oldest == 0 { // not looked up resolving rp
		var err error
		if oldest, _, err = firstDelta(txn, c); err != nil {
			return err
		}
	}
	if oldest > rp.seq+1 {
		return fmt.Errorf("journal: %s is older than the history retention keeps (history before %s is gone): %w",
			what, c.GetHistoryFloor().AsTime().UTC().Format(time.RFC3339), ErrCompacted)
	}
	return nil
}

// CreateTag names point at (Point.Latest for now) name, recording who made
// it and why. A name in use is refused with ErrExists; a bad one with
// ErrInvalid; a point that does not exist with ErrNotFound or
// ErrCompacted.
func (j *Journal) CreateTag(ctx context.Context, name string, at Point, by Sender) (*Tag, error) {
	if err := ValidateTagName(name); err != nil {
		return nil, err
	}
	if at.Tag != "" {
		return nil, fmt.Errorf("journal: a tag names a proposal index or the present, not another tag: %w", ErrInvalid)
	}
	var out *Tag
	err := j.submit(ctx, func(w *writeTxn) error {
		c, err := w.configuration()
		if err != nil {
			return err
		}
		if found, err := w.get(tagKey(name), &Tag{}); err != nil {
			return err
		} else if found {
			return fmt.Errorf("journal: tag %q exists already (delete it first: gnmi-sidecar journal tag --delete %s): %w", name, name, ErrExists)
		}
		if err := w.flushPending(); err != nil { // resolvePoint reads proposals in Badger
			return err
		}
		rp, err := resolvePoint(ctx, w.txn, c, at, w.now)
		if err != nil {
			return err
		}
		c.TagChanges++
		if err := w.put(keyConfiguration, c); err != nil {
			return err
		}
		if err := w.pruneTagDeletions(c.TagChanges); err != nil {
			return err
		}
		out = &Tag{
			Name:       name,
			Index:      rp.index,
			HistorySeq: rp.seq,
			Time:       timestamppb.New(rp.time),
			Created:    w.stamp(),
			Author:     by.Author,
			Comment:    by.Comment,
		}
		return w.put(tagKey(name), out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteTag removes tag name (ErrNotFound if there is none) and returns it.
// The deleted tag is recorded with who deleted it (WithActor) and when
// (TagDeletions).
func (j *Journal) DeleteTag(ctx context.Context, name string) (*Tag, error) {
	if err := ValidateTagName(name); err != nil {
		return nil, err
	}
	by := actor(ctx)
	var out *Tag
	err := j.submit(ctx, func(w *writeTxn) error {
		t := &Tag{}
		found, err := w.get(tagKey(name), t)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("journal: no tag %q: %w", name, ErrNotFound)
		}
		out = t
		c, err := w.configuration()
		if err != nil {
			return err
		}
		c.TagChanges++
		if err := w.put(keyConfiguration, c); err != nil {
			return err
		}
		if err := w.putTagDeletion(c.TagChanges, t, by); err != nil {
			return err
		}
		return w.delete(tagKey(name))
	})
	return out, err
}

// Tags returns the tags, by name.
func (j *Journal) Tags(ctx context.Context) ([]*Tag, error) {
	var out []*Tag
	err := j.view(ctx, func(txn *badger.Txn) error {
		return iteratePrefix(txn, nsTag, func(key, val []byte) error {
			t := &Tag{}
			if err := decodeRecord(val, t); err != nil {
				return fmt.Errorf("journal: decode %q: %w", key, err)
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// TagRestorable reports whether the journal still keeps the history after
// tag t's point, which going back to it needs.
func (j *Journal) TagRestorable(ctx context.Context, t *Tag) (bool, error) {
	ok := false
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		err = restorable(txn, c, resolvedPoint{seq: t.GetHistorySeq()}, "the tag")
		ok = err == nil
		if errors.Is(err, ErrCompacted) {
			return nil
		}
		return err
	})
	return ok, err
}

// PointTime returns the time a History snapshot reads point pt at.
func (j *Journal) PointTime(ctx context.Context, pt Point) (time.Time, error) {
	var at time.Time
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		rp, err := resolvePoint(ctx, txn, c, pt, j.opts.Clock())
		at = rp.time
		return err
	})
	return at, err
}

// ProposeRestore proposes, as one change recorded with who asked (by),
// going back to point pt: for every path a later history delta changed,
// what it held at the point (a delete where it held nothing). Its
// Change.restores names the point, and its Change.prefix the target of
// the values it writes back (by.Prefix is not used). The operations are
// computed from the committed configuration, so every earlier proposal's
// commit must be decided and no rollback's commit pending when it is
// journaled: should
// one be (a client's Set arriving meanwhile), it waits a little and
// computes again, a few times, then refuses with ErrGuard. Nothing to
// change is ErrNoChange; a point retention no longer reaches,
// ErrCompacted. Refused like ProposeChange while a commit-confirmed is
// outstanding. The then functions run as ProposeChange's do.
func (j *Journal) ProposeRestore(ctx context.Context, by Sender, pt Point, then ...func(*Tx) error) (*Proposal, error) {
	const attempts = 5
	for n := 1; ; n++ {
		p, err := j.proposeRestore(ctx, by, pt, then)
		if !errors.Is(err, errRestoreRaced) || n == attempts {
			return p, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(n) * 20 * time.Millisecond):
		}
	}
}

// errRestoreRaced: the committed configuration moved between computing a
// restore and journaling it.
var errRestoreRaced = errors.New("the committed configuration changed meanwhile")

func (j *Journal) proposeRestore(ctx context.Context, by Sender, pt Point, then []func(*Tx) error) (*Proposal, error) {
	var (
		ops []*Op
		rp  resolvedPoint
		at  uint64 // HistorySeq the ops were computed against
	)
	err := j.view(ctx, func(txn *badger.Txn) error {
		c, err := loadConfiguration(txn)
		if err != nil {
			return err
		}
		at = c.GetHistorySeq()
		rp, ops, err = restorePlan(ctx, txn, c, pt, j.opts.Clock())
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("journal: the committed configuration is as it was at %s: %w", pt, ErrNoChange)
	}
	// The operations' paths are full: the proposal's prefix names their
	// target and nothing else (nothing of the prefix of the Set that asked).
	target, err := restoreTarget(pt, ops)
	if err != nil {
		return nil, err
	}
	by.Prefix = gnmipath.TargetPrefix(target)
	return j.propose(ctx, by, ops, "a commit-confirmed is outstanding", "confirm or cancel it first, or wait for its rollback",
		func(w *writeTxn, p *Proposal) error {
			c, err := w.configuration()
			if err != nil {
				return err
			}
			settled, err := w.commitsSettled(c, p.GetIndex())
			if err != nil {
				return err
			}
			if c.GetHistorySeq() != at || !settled {
				return fmt.Errorf("%w: %w", errRestoreRaced, guardf(
					"the committed configuration kept changing while going back to %s was prepared (Sets arriving meanwhile): try again", pt))
			}
			p.Change.Restores = &Restore{Index: rp.index, Tag: rp.tag, HistorySeq: rp.seq}
			return w.put(proposalKey(p.GetIndex()), p)
		}, then)
}

// restorePlan locates pt, checks that the configuration can go back to it
// (its history is kept, no baseline since, nothing unknown to write back)
// and returns it with the operations that go back to it (restoreOps):
// what ProposeRestore proposes and RestoreDiff shows.
func restorePlan(ctx context.Context, txn *badger.Txn, c *Configuration, pt Point, now time.Time) (resolvedPoint, []*Op, error) {
	rp, err := resolvePoint(ctx, txn, c, pt, now)
	if err != nil {
		return rp, nil, err
	}
	if err := restorable(txn, c, rp, pt.String()); err != nil {
		return rp, nil, err
	}
	if b := c.GetBaselineIndex(); rp.index < b {
		return rp, nil, guardf("going back to %s would undo the baseline (proposal %d, tag %q): the device's own configuration as the sidecar read it, which it would delete; go back to %q or later",
			pt, b, BaselineTag, BaselineTag)
	}
	ops, err := restoreOps(ctx, txn, rp.seq)
	return rp, ops, err
}

// restoreTarget returns the one gNMI target of the values ops write back
// to go back to pt: one Set has one target.
func restoreTarget(pt Point, ops []*Op) (string, error) {
	targets := map[string]bool{}
	for _, op := range ops {
		targets[op.GetPath().GetTarget()] = true
	}
	if len(targets) > 1 {
		return "", guardf("the changes since %s were made under %d different targets (%v): one Set cannot go back to it; roll them back one by one",
			pt, len(targets), slices.Sorted(maps.Keys(targets)))
	}
	for target := range targets {
		return target, nil
	}
	return "", nil
}

// commitsSettled reports whether, for proposal i being journaled, every
// earlier proposal's commit is decided and no rollback awaits its commit:
// then the committed configuration is the one i's commit will start from.
func (w *writeTxn) commitsSettled(c *Configuration, i uint64) (bool, error) {
	// Commits are decided in index order: i-1's being decided, so are
	// all before it.
	if prev := i - 1; prev >= c.GetFirstIndex() && prev > 0 {
		p, err := w.proposalStatusView(c, prev)
		if err != nil {
			return false, err
		}
		if !Finished(p.GetChange().GetCommit()) {
			return false, nil
		}
	}
	if rb := c.GetRollingBack(); rb != 0 {
		p, err := w.proposalStatusView(c, rb)
		if err != nil {
			return false, err
		}
		if !Finished(p.GetRollback().GetCommit()) {
			return false, nil
		}
	}
	return true, nil
}

// restoreOps returns the operations that put back, at every path changed
// after history delta seq, what it held then: deletes (none under another)
// for paths that held nothing, then the values (a whole leaf-list as a
// replace, as a re-push sends it), in path order.
func restoreOps(ctx context.Context, txn *badger.Txn, seq uint64) ([]*Op, error) {
	undo, err := changesSince(ctx, txn, func(s uint64, _ *HistoryDelta) bool { return s > seq })
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(undo))
	for k := range undo {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a subtree sorts right after its root
	var deletes, writes []*Op
	var deleted *subtree
	for _, k := range keys {
		then := undo[k]
		now := &PathValue{}
		found, err := getRecord(txn, valueKey(nsCommitted, []byte(k)), now)
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		if !found {
			now = nil
		}
		if then.GetUnknown() {
			return nil, refuseUnknown("go back", []*PathValue{then})
		}
		thenLive, nowLive := then != nil && !then.GetDeleted(), now != nil && !now.GetDeleted()
		switch {
		case !thenLive && !nowLive:
		case !thenLive:
			if deleted != nil && deleted.contains([]byte(k)) {
				continue
			}
			if leaves.KeepsEntry(now.GetPath()) {
				// The device made it with the entry and keeps it while the
				// entry exists: a delete of the entry (or above) goes first;
				// a change going back to a point never deletes it by itself.
				continue
			}
			sub := subtreeOf(now.GetPath())
			deleted = &sub
			deletes = append(deletes, &Op{Kind: OpDelete, Path: now.GetPath()})
		case nowLive && leaves.Equal(then.GetValue(), now.GetValue()):
		default:
			kind := OpUpdate
			if leaves.IsLeafList(then.GetValue()) {
				kind = OpReplace
			}
			writes = append(writes, &Op{Kind: kind, Path: then.GetPath(),
				Values: []*Leaf{{Path: then.GetPath(), Value: then.GetValue()}}})
		}
	}
	return append(deletes, writes...), nil
}

// changesSince returns, for every path changed by a history delta for
// which after(seq, delta) holds (walking back from the newest, until it
// does not), what it held before the oldest of them (nil: nothing).
func changesSince(ctx context.Context, txn *badger.Txn, after func(seq uint64, d *HistoryDelta) bool) (map[string]*PathValue, error) {
	undo := make(map[string]*PathValue)
	err := newestFirst(ctx, txn, func(seq uint64, delta *HistoryDelta) bool {
		if !after(seq, delta) {
			return false
		}
		// Newest first, so the oldest change has the last word.
		for _, e := range delta.GetEntries() {
			path := e.GetAfter().GetPath()
			if path == nil {
				path = e.GetBefore().GetPath()
			}
			undo[string(PathKey(path))] = e.GetBefore()
		}
		return true
	})
	return undo, err
}
